"""Tracing for tests: ARVIS's tracer on the SDK's in-memory exporter, and span helpers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from arvis.telemetry.tracing import Tracing

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01"
TRACESTATE = "vendor=opaque-value"
PHASES = ("arvis.admission", "arvis.dispatch", "arvis.journal")


@dataclass
class Recorded:
    """A tracer and every span it has finished, synchronously (no batching)."""

    tracing: Tracing
    exporter: InMemorySpanExporter

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r} in {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return [span.name for span in self.spans]

    def children(self, parent: ReadableSpan) -> list[str]:
        """Names of the spans whose parent is ``parent``, in the order they ended."""
        return [span.name for span in self.spans if span.parent == parent.context]

    def clear(self) -> None:
        self.exporter.clear()


def recorded(*, record_payloads: bool = False) -> Recorded:
    exporter = InMemorySpanExporter()
    tracing = Tracing.with_exporter(exporter, batch=False, record_payloads=record_payloads)
    return Recorded(tracing, exporter)


def trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def every_value(spans: Sequence[ReadableSpan]) -> Iterator[tuple[str, str, Any]]:
    """(span, key, value) of every attribute a span carries: its own, its events',
    its links' and its resource's; and its name and status text as well."""
    for span in spans:
        yield span.name, "(name)", span.name
        yield span.name, "(status)", span.status.description or ""
        sources = [span.attributes or {}, span.resource.attributes]
        sources += [event.attributes or {} for event in span.events]
        sources += [link.attributes or {} for link in span.links]
        for attributes in sources:
            for key, value in attributes.items():
                yield span.name, key, value

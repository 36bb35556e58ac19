"""ARVIS's tracer: one span per syscall, after the OpenTelemetry GenAI conventions.

Imported only when tracing is on (``arvis.telemetry.load_tracing``): this is the
one module of ARVIS that needs the OpenTelemetry SDK.

ARVIS keeps its tracer provider to itself and leaves the process-global one alone,
so what ARVIS traces is what ``[telemetry]`` says, whatever else runs in the
process. Where something else did set a global provider (an auto-instrumented
FastAPI or MCP SDK), its spans are the current ones and ARVIS's spans nest under
them: parenthood follows the context, whichever provider made the span.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from arvis import __version__
from arvis.domain.boundary import EffectBoundary
from arvis.domain.canonical import canonical_bytes
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.telemetry import carriers, propagation
from arvis.telemetry.config import DEFAULT_SERVICE_NAME, TelemetrySettings
from arvis.tools.limits import FAILURE_CODE

log = logging.getLogger(__name__)

MAX_ARGUMENTS_CHARS = 8192
"""``record_payloads`` keeps at most this much of a payload's canonical JSON."""

# A result on these boundaries did not do what was asked.
_UNFINISHED = frozenset(
    {
        EffectBoundary.EFFECT_NOT_STARTED,
        EffectBoundary.EFFECT_FAILED,
        EffectBoundary.EFFECT_STATE_UNKNOWN,
    }
)


class Tracing:
    """Spans for syscalls (a :class:`~arvis.lifecycle.syscalls.SyscallTracer`), and the
    W3C context of callers in and of tool calls out."""

    def __init__(self, provider: TracerProvider, *, record_payloads: bool = False) -> None:
        self.provider = provider
        self.record_payloads = record_payloads
        self._tracer = provider.get_tracer("arvis", __version__)

    @classmethod
    def with_exporter(
        cls,
        exporter: SpanExporter | None,
        *,
        service_name: str = DEFAULT_SERVICE_NAME,
        record_payloads: bool = False,
        batch: bool = True,
    ) -> Tracing:
        """A tracer whose spans go to ``exporter`` (in batches, off the event loop,
        unless ``batch=False``); ``None`` makes spans and sends them nowhere."""
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
        if exporter is not None:
            processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
            provider.add_span_processor(processor)
        return cls(provider, record_payloads=record_payloads)

    @classmethod
    def from_settings(cls, settings: TelemetrySettings) -> Tracing:
        """The tracer ``[telemetry]`` and ``OTEL_*`` describe (``resolve_telemetry``)."""
        exporter: SpanExporter | None = None
        if settings.exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # Unset, the exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout).
            exporter = OTLPSpanExporter(endpoint=settings.endpoint)
        return cls.with_exporter(
            exporter, service_name=settings.service_name, record_payloads=settings.record_payloads
        )

    @contextmanager
    def syscall(self, syscall: Syscall, identity: Identity) -> Iterator[SyscallSpan]:
        """The ``execute_tool {tool}`` span, current while the syscall runs."""
        tool = syscall.decision.tool
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": syscall.causal_id,
            "arvis.run_id": syscall.run_id,
            "arvis.tenant_id": identity.tenant_id,
        }
        if self.record_payloads:
            arguments = _arguments(syscall)
            if arguments is not None:
                attributes["gen_ai.tool.call.arguments"] = arguments
        with self._tracer.start_as_current_span(
            f"execute_tool {tool}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            # An exception's text may quote what the caller sent: record its type only.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield SyscallSpan(self._tracer, span)
            except BaseException as exc:
                _failed(span, exc)
                key = getattr(exc, "idempotency_key", None)
                if isinstance(key, str):
                    span.set_attribute("arvis.idempotency_key", key)
                raise

    @contextmanager
    def continued(self, traceparent: object, tracestate: object = None) -> Iterator[None]:
        """Make the caller's trace current, so the spans made meanwhile continue it.

        A span already being recorded wins: an instrumented transport continued the
        caller's trace itself. Otherwise a valid ``traceparent`` is the parent, and
        anything else (none, malformed, too long) starts a new trace.
        """
        current = otel_context.get_current()
        if trace.get_current_span(current).is_recording():
            yield
            return
        root = trace.set_span_in_context(trace.INVALID_SPAN, current)
        token = otel_context.attach(propagation.extract(traceparent, tracestate, root) or root)
        try:
            yield
        finally:
            otel_context.detach(token)

    def continued_from_headers(
        self, headers: Iterable[tuple[bytes, bytes]]
    ) -> AbstractContextManager[None]:
        """:meth:`continued` from a request's raw (ASGI) headers."""
        return self.continued(*carriers.from_headers(headers))

    def inject(self, carrier: MutableMapping[str, Any]) -> None:
        """Carry the current span on: ``traceparent``/``tracestate`` into ``carrier``."""
        propagation.inject(carrier)

    async def inject_request(self, request: httpx.Request) -> None:
        """An httpx request hook: every outgoing tool request continues the trace."""
        propagation.inject(request.headers)

    def shutdown(self) -> None:
        """Send what is buffered and stop (blocks up to the exporter's timeout)."""
        self.provider.shutdown()


class SyscallSpan:
    """One syscall's span: its phases as child spans, its answer as attributes."""

    __slots__ = ("_span", "_tracer")

    def __init__(self, tracer: trace.Tracer, span: Span) -> None:
        self._tracer = tracer
        self._span = span

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """``arvis.admission``, ``arvis.dispatch`` or ``arvis.journal``, current meanwhile
        (so a tool's outgoing request is the dispatch span's child)."""
        with self._tracer.start_as_current_span(
            f"arvis.{name}", record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                yield
            except BaseException as exc:
                _failed(span, exc)
                raise

    def answered(self, result: SyscallResult) -> None:
        """Record the governed outcome (never the result itself)."""
        try:
            self._span.set_attributes(_outcome_attributes(result))
            error = _result_error(result)
            if error is not None:
                self._span.set_attribute("error.type", error)
                self._span.set_status(Status(StatusCode.ERROR))
        except Exception:  # telemetry must never fail a syscall
            log.exception("recording a syscall's outcome failed")


def _outcome_attributes(result: SyscallResult) -> Mapping[str, Any]:
    attributes: dict[str, Any] = {
        "arvis.outcome": result.outcome,
        "arvis.idempotency_key": result.idempotency_key,
    }
    if result.boundary is not None:
        attributes["arvis.boundary"] = result.boundary.value
    if result.attempt is not None:
        attributes["arvis.attempt"] = result.attempt
    if result.journal_position is not None:
        attributes["arvis.journal_position"] = result.journal_position
    if result.confirmation is not None:
        attributes["arvis.confirmation_id"] = result.confirmation.id
    if result.audit_incomplete:
        attributes["arvis.audit_incomplete"] = True
    return attributes


def _result_error(result: SyscallResult) -> str | None:
    """``error.type`` of an answer: the denial code, the problem code, or the boundary."""
    if result.outcome == "refused":
        return result.reason or "refused"
    code = (result.problem or {}).get("code")
    if isinstance(code, str) and FAILURE_CODE.fullmatch(code):
        return code
    if result.boundary in _UNFINISHED:
        return str(result.boundary)
    return None


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: an ARVIS code, else the class's full name."""
    if isinstance(exc, ArvisError):
        return exc.code
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _failed(span: Span, exc: BaseException) -> None:
    span.set_attribute("error.type", error_type(exc))
    span.set_status(Status(StatusCode.ERROR))


def _arguments(syscall: Syscall) -> str | None:
    try:
        text = canonical_bytes(syscall.decision.payload).decode("utf-8")
    except (ArvisError, ValueError, TypeError):
        return None  # not JSON: the handler refuses it, with nothing to record
    return text[:MAX_ARGUMENTS_CHARS]

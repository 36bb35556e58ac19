"""A caller's W3C trace context in, ARVIS's out; what is malformed starts a new trace."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace

from arvis.telemetry.carriers import MAX_TRACESTATE_CHARS, from_headers
from tests.support.tracing import (
    CALLER_SPAN_ID,
    CALLER_TRACE_ID,
    TRACEPARENT,
    TRACESTATE,
    parent_id,
    recorded,
    span_id,
    trace_id,
)


def started_under(traceparent: object, tracestate: object = None) -> tuple[str, str | None]:
    """(trace id, parent span id) of a span started while ``continued`` is open."""
    spans = recorded()
    tracer = spans.tracing.provider.get_tracer("test")
    with spans.tracing.continued(traceparent, tracestate), tracer.start_as_current_span("s"):
        pass
    span = spans.one("s")
    return trace_id(span), parent_id(span)


def test_a_valid_traceparent_is_the_parent() -> None:
    assert started_under(TRACEPARENT) == (CALLER_TRACE_ID, CALLER_SPAN_ID)


@pytest.mark.parametrize(
    "traceparent",
    [
        None,
        "",
        42,
        ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        "not a traceparent",
        f"00-{'0' * 32}-00f067aa0ba902b7-01",  # the all-zero trace id is invalid
        f"00-{CALLER_TRACE_ID}-{'0' * 16}-01",
        f"ff-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01",  # version ff is forbidden
        f"00-{CALLER_TRACE_ID.upper()}-{CALLER_SPAN_ID}-01",
        f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01-extra",  # version 00 has four fields
        TRACEPARENT + " " * 200,  # past the bound, even if it would parse
    ],
)
def test_anything_else_starts_a_new_trace(traceparent: object) -> None:
    trace_id_, parent = started_under(traceparent)
    assert parent is None
    assert trace_id_ != CALLER_TRACE_ID


def test_a_new_trace_does_not_inherit_an_unrecorded_ambient_parent() -> None:
    # E.g. a context an uninstrumented library left current: the carrier decides.
    ambient = trace.NonRecordingSpan(
        trace.SpanContext(int(CALLER_TRACE_ID, 16), int(CALLER_SPAN_ID, 16), is_remote=True)
    )
    with trace.use_span(ambient):
        _, parent = started_under("garbage")
    assert parent is None


def test_a_recording_span_already_current_wins_over_the_carrier() -> None:
    spans = recorded()
    tracer = spans.tracing.provider.get_tracer("test")
    with (
        tracer.start_as_current_span("server"),
        spans.tracing.continued(TRACEPARENT),
        tracer.start_as_current_span("inner"),
    ):
        pass
    assert parent_id(spans.one("inner")) == span_id(spans.one("server"))


def test_inject_writes_the_current_span_and_its_tracestate() -> None:
    spans = recorded()
    tracer = spans.tracing.provider.get_tracer("test")
    carrier: dict[str, Any] = {"arvis.dev/call_id": "int_1"}
    with spans.tracing.continued(TRACEPARENT, TRACESTATE), tracer.start_as_current_span("d"):
        spans.tracing.inject(carrier)
    dispatch = spans.one("d")
    assert carrier == {
        "arvis.dev/call_id": "int_1",
        "traceparent": f"00-{CALLER_TRACE_ID}-{span_id(dispatch)}-01",
        "tracestate": TRACESTATE,
    }


def test_inject_writes_nothing_outside_a_span() -> None:
    carrier: dict[str, Any] = {}
    recorded().tracing.inject(carrier)
    assert carrier == {}


def test_headers_are_read_bounded_and_a_repeated_traceparent_is_unusable() -> None:
    parent = TRACEPARENT.encode()
    assert from_headers([(b"traceparent", parent)]) == (TRACEPARENT, None)
    states = [(b"tracestate", b"a=1"), (b"tracestate", b"b=2")]
    assert from_headers([(b"traceparent", parent), *states]) == (TRACEPARENT, "a=1,b=2")
    assert from_headers([(b"traceparent", parent), (b"traceparent", parent)]) == (None, None)
    assert from_headers([(b"traceparent", parent + b" " * 200)]) == (None, None)
    long_state = b"a=" + b"x" * MAX_TRACESTATE_CHARS
    # An over-long tracestate is dropped; the traceparent still counts.
    assert from_headers([(b"traceparent", parent), (b"tracestate", long_state)]) == (
        TRACEPARENT,
        None,
    )
    assert from_headers([(b"accept", b"*/*")]) == (None, None)


def test_an_over_long_tracestate_in_meta_is_dropped_and_the_parent_kept() -> None:
    assert started_under(TRACEPARENT, "a=" + "x" * MAX_TRACESTATE_CHARS) == (
        CALLER_TRACE_ID,
        CALLER_SPAN_ID,
    )

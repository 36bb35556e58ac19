"""W3C Trace Context in and out: ``traceparent`` and ``tracestate``, nothing else.

Read from whatever a caller sends (HTTP headers, MCP ``_meta``), so bounded before
anything parses it: a ``traceparent`` longer than :data:`MAX_TRACEPARENT_CHARS`,
two ``traceparent`` values, or one that is not valid W3C is ignored (the call
starts a new trace; it is never refused for it). A ``tracestate`` longer than
:data:`MAX_TRACESTATE_CHARS` is dropped and the ``traceparent`` kept, as the W3C
recommendation allows. Baggage is not propagated: whatever a caller puts there
would travel on to every tool endpoint.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from arvis.telemetry.carriers import (
    MAX_TRACEPARENT_CHARS,
    MAX_TRACESTATE_CHARS,
    TRACEPARENT,
    TRACESTATE,
)

_W3C = TraceContextTextMapPropagator()


def extract(traceparent: object, tracestate: object, base: Context) -> Context | None:
    """``base`` with the caller's span as parent, or None when ``traceparent`` is
    absent or unusable."""
    if not isinstance(traceparent, str) or len(traceparent) > MAX_TRACEPARENT_CHARS:
        return None
    carrier = {TRACEPARENT: traceparent}
    if isinstance(tracestate, str) and len(tracestate) <= MAX_TRACESTATE_CHARS:
        carrier[TRACESTATE] = tracestate
    context = _W3C.extract(carrier, context=base)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def inject(carrier: MutableMapping[str, Any]) -> None:
    """Write the current span's ``traceparent`` (and ``tracestate``) into ``carrier``."""
    _W3C.inject(carrier)

"""Where a caller's W3C trace context is found, read without OpenTelemetry.

Bounded as it is read: see :mod:`arvis.telemetry.propagation` for what is done with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACEPARENT_CHARS = 128
"""Version 00 is 55 characters; later versions may append fields."""
MAX_TRACESTATE_CHARS = 512
"""What W3C asks every vendor to propagate at least."""


def from_headers(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """``traceparent`` and ``tracestate`` of raw ASGI headers, bounded as they are read.

    Two ``traceparent`` fields make it unusable (W3C); ``tracestate`` fields combine
    with commas (RFC 9110).
    """
    parents: list[bytes] = []
    states: list[bytes] = []
    state_bytes = 0
    for name, value in headers:
        if name == b"traceparent":
            parents.append(value)
        elif name == b"tracestate":
            state_bytes += len(value) + 1
            states.append(value)
    if len(parents) != 1 or len(parents[0]) > MAX_TRACEPARENT_CHARS:
        return None, None
    parent = parents[0].decode("latin-1")
    if not states or state_bytes - 1 > MAX_TRACESTATE_CHARS:
        return parent, None
    return parent, b",".join(states).decode("latin-1")


def from_mapping(carrier: Mapping[str, Any] | None) -> tuple[object, object]:
    """``traceparent`` and ``tracestate`` of an MCP ``_meta`` or a header mapping."""
    if not carrier:
        return None, None
    return carrier.get(TRACEPARENT), carrier.get(TRACESTATE)

"""The caller's W3C trace, continued for the length of a request (docs/telemetry.md).

With tracing on, a request's ``traceparent``/``tracestate`` headers become the
parent of whatever spans it causes: the syscall span of ``POST /v1/syscalls``,
whether the fast lane or the route answers it. A malformed or over-long header
starts a new trace; it never fails the request. With tracing off this is one
attribute read per request.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class TraceContext:
    """Continue the caller's trace while the app answers (outside the deadline, whose
    task inherits the context)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kernel = getattr(scope["app"].state, "kernel", None) if scope["type"] == "http" else None
        tracing = None if kernel is None else kernel.tracing
        if tracing is None:
            await self.app(scope, receive, send)
            return
        with tracing.continued_from_headers(scope["headers"]):
            await self.app(scope, receive, send)

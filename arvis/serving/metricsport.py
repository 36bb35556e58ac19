"""``/metrics`` on a loopback port of its own, with no key (``ARVIS_METRICS_PORT``).

A Prometheus scraper on the same host or in the same pod should not need an admin key,
which can do far more than read counters. ``arvis serve`` listens on
``127.0.0.1:ARVIS_METRICS_PORT`` beside its main socket, in the same server and
workers, so the scrape reads the same registry as ``GET /metrics`` with a key. This
layer answers every request that arrived on that socket (the local address is the
connection's, not something a client can claim): ``GET /metrics``, or 404. Nothing
else of the API is reachable there.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from arvis.api.routes.system import scrape
from arvis.web.problems import problem

METRICS_HOST = "127.0.0.1"


class MetricsPort:
    """ASGI middleware: requests that came in on ``port`` get the metrics, or 404."""

    def __init__(self, app: ASGIApp, *, port: int) -> None:
        self.app = app
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server: Any = scope.get("server") or (None, None)
        if scope["type"] != "http" or server[1] != self.port:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        if scope["path"] == "/metrics" and scope["method"] in ("GET", "HEAD"):
            response = await scrape(request.app.state.kernel, request.app.state.metrics)
        else:
            response = problem(
                "not_found", "only GET /metrics is served on the metrics port", status=404
            )
        await response(scope, receive, send)

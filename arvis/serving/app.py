"""The FastAPI application, created by a factory from the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Protocol

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.routing import Route

from arvis import __version__
from arvis.api.routes import (
    budgets,
    bundles,
    confirmations,
    keys,
    resolutions,
    runs,
    syscalls,
    system,
)
from arvis.api.routes import checkpoints as run_checkpoints
from arvis.bootstrap import build_kernel
from arvis.config import Environment, load_settings
from arvis.console import ConsoleHeaders
from arvis.console import mount as mount_console
from arvis.kernel import Kernel
from arvis.lifecycle.syscalls import SyscallObserver
from arvis.mcp.endpoint import McpEndpoint
from arvis.serving.docs import serve_docs
from arvis.serving.fastlane import SyscallFastLane
from arvis.serving.metricsport import MetricsPort
from arvis.slack.route import router as slack_router
from arvis.web.identity import AnyIdentity
from arvis.web.logs import configure_json_logging
from arvis.web.metrics import ApiMetrics
from arvis.web.middleware import AccessLog, BodyGuard, Deadline
from arvis.web.problems import install_problem_handlers
from arvis.web.tracing import TraceContext


class KernelFactory(Protocol):
    """Builds the app's kernel at start-up, wiring in the app's metrics as its syscall observer.

    :func:`arvis.bootstrap.build_kernel` is one (the default);
    ``functools.partial(build_kernel, settings)`` is one for given settings.
    """

    def __call__(self, *, observer: SyscallObserver) -> Awaitable[Kernel]: ...


def create_app(
    kernel_factory: KernelFactory | None = None,
    *,
    max_body_bytes: int | None = None,
    request_timeout_s: float | None = None,
    fast_lane: bool = True,
    environment: Environment | None = None,
    owns_kernel: bool = True,
    metrics: ApiMetrics | None = None,
    metrics_port: int | None = None,
) -> FastAPI:
    """Build the app; the kernel is wired at start-up and closed at shutdown.

    ``max_body_bytes``, ``request_timeout_s`` and ``environment`` default to
    ``ARVIS_MAX_BODY_BYTES``, ``ARVIS_REQUEST_TIMEOUT_S`` and ``ARVIS_ENV``; in
    production the API docs are not served and the OpenAPI schema needs a key
    (docs/http.md). ``fast_lane=False`` leaves every syscall to the FastAPI route
    (arvis.serving.fastlane; the tests compare the two). ``owns_kernel=False`` leaves
    starting and closing the kernel to the caller (``arvis serve-turn`` starts it
    before it listens and closes it after); such a caller builds the kernel with the
    ``metrics`` it hands in as its observer. With ``metrics_port``, requests that came in
    on that port get ``/metrics`` with no key, and nothing else (arvis.serving.metricsport).
    """
    factory = kernel_factory or build_kernel
    if max_body_bytes is None or request_timeout_s is None or environment is None:
        settings = load_settings()
        max_body_bytes = max_body_bytes or settings.max_body_bytes
        request_timeout_s = request_timeout_s or settings.request_timeout_s
        environment = environment or settings.env
    open_docs = environment is not Environment.PRODUCTION
    metrics = metrics or ApiMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        kernel = await factory(observer=metrics)
        app.state.kernel = kernel
        try:
            if owns_kernel:
                await kernel.start()
            async with mcp.serving(kernel):
                yield
        finally:
            if owns_kernel:
                await kernel.close()

    app = FastAPI(
        title="ARVIS",
        version=__version__,
        lifespan=lifespan,
        description="Durable effect governance for AI agents. See docs/http.md.",
        openapi_url="/openapi.json" if open_docs else None,
        docs_url=None,  # arvis.serving.docs: the same pages, with no CDN
        redoc_url=None,
    )
    if open_docs:
        serve_docs(app, "/openapi.json")
    else:
        _serve_schema_to_keys(app)
    app.state.metrics = metrics
    install_problem_handlers(app)
    for module in (syscalls, runs, resolutions, confirmations, system, budgets, keys):
        app.include_router(module.router)
    app.include_router(run_checkpoints.router)
    app.include_router(bundles.router)
    app.include_router(slack_router)
    mount_console(app)
    # MCP over streamable HTTP (arvis.mcp.server): bodies are bounded JSON like any
    # other, and every answer is one JSON response, so the middlewares below apply.
    mcp = McpEndpoint()
    app.router.routes.append(
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    # Added innermost first, so the order is: access log, trace context, deadline,
    # body guard, the syscall fast lane. The access log sees every answer; the
    # caller's trace is current before the deadline starts the request's task (which
    # inherits it); the deadline covers a slow body as well; the fast lane only ever
    # sees bounded JSON bodies.
    if fast_lane:
        app.add_middleware(SyscallFastLane)
    app.add_middleware(BodyGuard, max_body_bytes=max_body_bytes)
    app.add_middleware(Deadline, timeout_s=request_timeout_s)
    app.add_middleware(TraceContext)
    app.add_middleware(
        AccessLog,
        on_response=lambda method, status: metrics.requests.labels(method, str(status)).inc(),
    )
    # Outermost: whichever layer answers under /console (a route, the body guard, the
    # deadline, the router's 405), the answer carries the console's security headers.
    app.add_middleware(ConsoleHeaders)
    if metrics_port is not None:
        app.add_middleware(MetricsPort, port=metrics_port)
    return app


def _serve_schema_to_keys(app: FastAPI) -> None:
    # In production every route but health needs a key (DESIGN §7). A browser cannot
    # send one to /docs or /redoc, so those are not served; a client generator can
    # send one for the schema.
    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_: AnyIdentity) -> JSONResponse:
        return JSONResponse(app.openapi())


def create_served_app() -> FastAPI:
    """What ``arvis serve`` runs in each worker: JSON logs, settings from the environment."""
    settings = load_settings()
    configure_json_logging(settings.log_level)
    return create_app(
        max_body_bytes=settings.max_body_bytes,
        request_timeout_s=settings.request_timeout_s,
        environment=settings.env,
        metrics_port=settings.metrics_port,
    )

"""The FastAPI application, created by a factory from the composition root."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from arvis import __version__
from arvis.api.problems import problem
from arvis.bootstrap import Kernel, build_kernel
from arvis.store.errors import StoreUnavailable

KernelFactory = Callable[[], Awaitable[Kernel]]


def create_app(kernel_factory: KernelFactory | None = None) -> FastAPI:
    """Build the app; the kernel is wired at start-up and closed at shutdown."""
    factory = kernel_factory or build_kernel

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        kernel = await factory()
        app.state.kernel = kernel
        try:
            yield
        finally:
            await kernel.close()

    app = FastAPI(title="ARVIS", version=__version__, lifespan=lifespan)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], response_model=None)
    async def readyz(request: Request) -> dict[str, str] | JSONResponse:
        """Readiness: the database answers."""
        kernel: Kernel = request.app.state.kernel
        try:
            await kernel.store.ping()
        except StoreUnavailable as exc:
            return problem("store_unavailable", exc.message)
        return {"status": "ready"}

    return app

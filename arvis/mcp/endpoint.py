"""``/mcp`` as the app mounts it: the key, the role and the method, then MCP.

A bearer credential that does not authenticate is its 401 (or 403) problem, as on
every route (:mod:`arvis.identity.errors`); one without the ``agent`` role 403, before
any MCP processing. The transport is stateless, so there is no session to end and no
server-to-client stream: ``GET`` and ``DELETE`` answer 405 (after the credential, like
everything else).

The MCP SDK costs more to import than the rest of a serve worker, so the
gateway (:mod:`arvis.mcp.server`) is loaded off the event loop on the first
request that needs it: a worker starts, claims its lease and beats it as fast
as one that never serves MCP.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from starlette.types import Receive, Scope, Send

from arvis.identity.errors import IdentityRefusal
from arvis.web.identity import authenticate, scope_log_fields, subject_token_of
from arvis.web.problems import error_response, problem

if TYPE_CHECKING:
    from arvis.kernel import Kernel
    from arvis.mcp.server import McpGateway


class McpEndpoint:
    """ASGI endpoint for ``/mcp``; answers 503 outside :meth:`serving`."""

    def __init__(self) -> None:
        self._kernel: Kernel | None = None
        self._gateway: McpGateway | None = None
        self._stack: AsyncExitStack | None = None
        self._loading: asyncio.Lock | None = None

    @asynccontextmanager
    async def serving(self, kernel: Kernel) -> AsyncIterator[None]:
        """Serve MCP for ``kernel`` while open; the gateway stops with it."""
        self._kernel, self._stack, self._loading = kernel, AsyncExitStack(), asyncio.Lock()
        try:
            yield
        finally:
            stack = self._stack
            self._kernel = self._gateway = self._stack = None
            await stack.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kernel = self._kernel
        if kernel is None:
            await problem("shutting_down", "MCP is not being served")(scope, receive, send)
            return
        try:
            identity = await authenticate(
                kernel,
                _bearer(scope),
                scope_log_fields(scope),
                subject_token=subject_token_of(scope),
            )
        except IdentityRefusal as exc:
            await problem(exc.code, exc.message)(scope, receive, send)
            return
        except Exception as exc:  # e.g. the store is unavailable: as every route answers
            await error_response(exc)(scope, receive, send)
            return
        if not identity.has_role("agent"):
            await problem("forbidden_role", "/mcp needs the role agent")(scope, receive, send)
            return
        if scope["method"] != "POST":
            refused = problem("method_not_allowed", "MCP here is one POST per message")
            refused.headers["Allow"] = "POST"
            await refused(scope, receive, send)
            return
        gateway = self._gateway or await self._load(kernel)
        await gateway.handle(identity, scope, receive, send)

    async def _load(self, kernel: Kernel) -> McpGateway:
        assert self._loading is not None
        assert self._stack is not None
        async with self._loading:
            if self._gateway is None:
                server = await asyncio.to_thread(importlib.import_module, "arvis.mcp.server")
                gateway: McpGateway = server.McpGateway()
                await self._stack.enter_async_context(gateway.running(kernel))
                self._gateway = gateway
            return self._gateway


def _bearer(scope: Scope) -> str | None:
    """The credentials of ``Authorization: Bearer …``, read as FastAPI's HTTPBearer does."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            return credentials if scheme.lower() == "bearer" and credentials else None
    return None

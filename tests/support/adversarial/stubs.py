"""The hostile upstreams, running: what every tool kind of the suite calls.

- an HTTP tool endpoint: ``POST /<mode>`` acts, then answers as the mode says (``ok``:
  a proper ``{"value": ...}``);
- an MCP server over streamable HTTP: the SDK's server answers the handshake, the tool
  list and the JSON-RPC modes; a front reads each ``tools/call`` first and, for a
  transport mode, acts and answers that way itself;
- the command of an MCP server over stdio (``stdio/hostile_server.py``), which ARVIS
  starts as its child — one per ARVIS process, all logging to one effect file.

Both HTTP stubs run on a loop of their own (:class:`LoopThread`), so they answer while a
test blocks on a subprocess.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from tests.support.adversarial.asgi import forward
from tests.support.adversarial.catalog import answer_hostile, mcp_server, tool_call
from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.loopthread import LoopThread
from tests.support.adversarial.modes import IDEMPOTENCY_KEY, MCP_HTTP_MODES, TRANSPORT_MODES
from tests.support.adversarial.rawhttp import RawHttpServer, Request, black_hole, respond

STDIO_SERVER = Path(__file__).resolve().parent / "stdio" / "hostile_server.py"


@dataclass
class HostileStubs:
    """The running stubs and where their effects are written."""

    root: Path
    http_port: int
    mcp_port: int
    refusing_port: int
    """Bound, never listening: a connection to it is refused."""
    loop: LoopThread
    running: _Running

    @property
    def http_effects(self) -> EffectLog:
        return EffectLog(self.root / "http-effects.jsonl")

    @property
    def mcp_http_effects(self) -> EffectLog:
        return EffectLog(self.root / "mcp-http-effects.jsonl")

    @property
    def stdio_state(self) -> Path:
        return self.root / "stdio"

    @property
    def stdio_effects(self) -> EffectLog:
        return EffectLog(self.stdio_state / "effects.jsonl")

    def http_url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.http_port}/{mode}"

    @property
    def refused_url(self) -> str:
        return f"http://127.0.0.1:{self.refusing_port}/refused"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.mcp_port}/mcp"

    @contextmanager
    def mcp_unreachable(self) -> Iterator[None]:
        """While the block runs, a new connection to the MCP server hangs before it is made
        (sessions already open stay, as does the tool list ARVIS pinned)."""
        self.loop.run(self.running.mcp.pause())
        try:
            with black_hole(self.mcp_port):
                yield
        finally:
            self.loop.run(self.running.mcp.resume())

    @property
    def stdio_command(self) -> list[str]:
        return [sys.executable, str(STDIO_SERVER), str(self.stdio_state)]


class _Running:
    def __init__(self, root: Path) -> None:
        self.hang = asyncio.Event()
        self.http_effects = EffectLog(root / "http-effects.jsonl")
        self.mcp_effects = EffectLog(root / "mcp-http-effects.jsonl")
        self.http = RawHttpServer(self._tool_endpoint)
        self.mcp = RawHttpServer(self._mcp_endpoint)
        self.manager = StreamableHTTPSessionManager(
            app=mcp_server("hostile-http", MCP_HTTP_MODES, self.mcp_effects),
            json_response=True,
            stateless=True,
        )

    async def _tool_endpoint(self, request: Request, writer: asyncio.StreamWriter) -> None:
        mode = request.path.strip("/")
        try:
            token = request.json().get("payload", {}).get("token")
        except (ValueError, AttributeError):
            token = None
        self.http_effects.record(mode, token, request.headers.get("idempotency-key"))
        if mode in TRANSPORT_MODES:
            await answer_hostile(mode, writer, self.hang)
            return
        await respond(
            writer, 200, b'{"value": {"done": true}}', {"Content-Type": "application/json"}
        )

    async def _mcp_endpoint(self, request: Request, writer: asyncio.StreamWriter) -> None:
        call = tool_call(request)
        if call is not None and call[0] in TRANSPORT_MODES:
            name, arguments, meta = call
            self.mcp_effects.record(name, arguments.get("token"), meta.get(IDEMPOTENCY_KEY))
            await answer_hostile(name, writer, self.hang)
            return
        await forward(self.manager.handle_request, request, writer, self.mcp.port)


@asynccontextmanager
async def _serving(root: Path) -> AsyncIterator[_Running]:
    running = _Running(root)
    await running.http.start()
    await running.mcp.start()
    async with running.manager.run():
        try:
            yield running
        finally:
            running.hang.set()
            await running.http.close()
            await running.mcp.close()


@contextmanager
def hostile_stubs(root: Path) -> Iterator[HostileStubs]:
    """Every stub, listening until the block ends."""
    import socket

    (root / "stdio").mkdir(parents=True, exist_ok=True)
    with LoopThread() as loop, socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))
        ready: asyncio.Future[_Running] = loop.loop.create_future()
        stop = asyncio.Event()

        async def serve() -> None:
            # The SDK's manager must be left by the task that entered it.
            async with _serving(root) as running:
                ready.set_result(running)
                await stop.wait()

        task = asyncio.run_coroutine_threadsafe(serve(), loop.loop)
        running: Any = loop.run(_wait(ready))
        try:
            yield HostileStubs(
                root=root,
                http_port=running.http.port,
                mcp_port=running.mcp.port,
                refusing_port=int(refusing.getsockname()[1]),
                loop=loop,
                running=running,
            )
        finally:
            loop.loop.call_soon_threadsafe(stop.set)
            task.result(30)


async def _wait(future: asyncio.Future[_Running]) -> _Running:
    return await future

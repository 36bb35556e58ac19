"""One upstream MCP server (DESIGN §3): ARVIS is its MCP client.

An :class:`UpstreamServer` holds one pooled session for the whole process. A
supervisor task owns the session's context, because the SDK's task groups must
be entered and left by one task; calls from any task share the session.

A stdio child that dies ends its session, and the next call starts a new one.
Its death stays inside the supervisor task: a caller sees a classified failure,
the process never sees anything. Whether a call was *sent* decides its effect
boundary, so the session tells: a call made on a session known to be dead
restarts it first, and a restart that fails raises :class:`UpstreamUnavailable`
before anything was written.

A streamable HTTP server can be gone while its session still looks live (each
message is a POST of its own). The SDK then ends the session and answers the
call "connection closed", which could also follow a request that arrived; and on a
busy host it can time a call out before the call's POST even began. The HTTP client
underneath watches (``sending.py``): a ``tools/call`` whose connection could not be
made, or whose request never began to be sent before the caller gave up, is one
:meth:`UpstreamServer.call` raises :class:`UpstreamUnavailable` for — the proof
that nothing was sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from arvis import __version__
from arvis.domain.errors import ArvisError, fields
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.keys import CALL_ID
from arvis.tools.mcp.sending import SendProof, WatchedClient

log = logging.getLogger(__name__)

_CLIENT_INFO = types.Implementation(name="arvis", version=__version__)
# Bounds a tools/list walk, so a server whose cursors never end cannot hang start-up.
_MAX_LIST_PAGES = 100
# Errors after which a session is of no more use.
_SESSION_LOST = frozenset({types.CONNECTION_CLOSED, types.INVALID_REQUEST})
# How long shutdown waits for a session to wind down (the SDK bounds its own steps).
_CLOSE_TIMEOUT_S = 10.0

# The SDK types its stream pair with private protocols; here they pass through unchanged.
_Streams = tuple[Any, Any]


@fields
class UpstreamUnavailable(ArvisError, code="mcp_upstream_unavailable"):
    """The server could not be started or reached: nothing was sent to it."""

    template = "the MCP server {server!r} is unavailable: {reason}"
    server: str
    reason: str


@fields
class UpstreamChanged(ArvisError, code="mcp_upstream_changed"):
    """The server now lists a tool differently from the definition pinned at start-up."""

    template = (
        "the MCP server {server!r} now describes {tool!r} differently from the tool "
        "plan; restart ARVIS to pin its new tool list"
    )
    server: str
    tool: str


class _Session:
    """One connection and the supervisor task that owns it."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.failure: str | None = None
        self.ready = asyncio.Event()
        """Set once connected, or once connecting failed (then ``failure`` says why)."""
        self.ended = asyncio.Event()
        """The transport's read side ended: the server is gone, nothing more arrives."""
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        return self.client is not None and not self.ended.is_set()


class UpstreamServer:
    """A declared upstream server: a supervised, restartable, shared client session."""

    def __init__(self, config: McpServerConfig, headers: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._headers = dict(headers or {})
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self._pinned: dict[str, dict[str, Any]] = {}
        self._current: dict[str, dict[str, Any]] = {}
        self._winding: set[asyncio.Task[None]] = set()
        self._closed = False
        self._sending = SendProof()
        """What the HTTP client proves of each ``tools/call`` it carried (or did not)."""

    @property
    def name(self) -> str:
        return self.config.name

    async def start(self) -> list[types.Tool]:
        """Connect and read the tool list, which is pinned from here on.

        Raises :class:`UpstreamUnavailable` when the server cannot be started,
        reached or listed within ``startup_timeout_s``.
        """
        async with self._lock:
            listed = await self._open()
            self._pinned = dict(self._current)
        return listed

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        """Send one ``tools/call``.

        :class:`UpstreamUnavailable` and :class:`UpstreamChanged` mean nothing was
        sent. Anything raised after that (an ``MCPError``, a timeout) comes from a
        request that may have reached the server.
        """
        session = await self._ready()
        if self._current.get(tool) != self._pinned.get(tool):
            raise UpstreamChanged(self.name, tool)
        assert session.client is not None
        call_id = meta.get(CALL_ID)
        try:
            return await session.client.session.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.config.timeout_s,
                meta=cast(types.RequestParamsMeta, meta),
                allow_input_required=True,
                allow_claimed=True,
            )
        except MCPError as exc:
            if exc.code in _SESSION_LOST:
                # The next call starts a new session (an HTTP server that forgot ours).
                session.ended.set()
            if self._sending.abandon_if_unsent(call_id):
                raise UpstreamUnavailable(
                    self.name, f"the call was not sent ({exc.error.message})"
                ) from None
            raise
        finally:
            self._sending.forget(call_id)

    async def _ready(self) -> _Session:
        """A live session, restarted if it died, within ``startup_timeout_s``.

        The budget (waiting for another caller's restart included) keeps a call
        that never got to send from outliving the dispatcher's deadline, which
        could only classify it as uncertain.
        """
        budget = self.config.startup_timeout_s
        try:
            async with asyncio.timeout(budget), self._lock:
                session = self._session
                if session is None or not session.live:
                    if session is not None:
                        self._retire(session)
                    await self._open()
                    session = self._session
        except TimeoutError:
            raise UpstreamUnavailable(self.name, f"no live session within {budget:g} s") from None
        assert session is not None
        return session

    async def aclose(self) -> None:
        """Stop the session (a stdio child is asked to exit, then killed)."""
        self._closed = True
        if self._session is not None:
            self._retire(self._session)
        if not self._winding:
            return
        _, pending = await asyncio.wait(set(self._winding), timeout=_CLOSE_TIMEOUT_S)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("the MCP server %r did not shut down in time", self.name)

    async def _open(self) -> list[types.Tool]:
        """A fresh session with its tool list read; the caller holds the lock."""
        if self._closed:
            raise UpstreamUnavailable(self.name, "ARVIS is shutting down")
        session = _Session()
        session.task = asyncio.create_task(self._supervise(session), name=f"mcp:{self.name}")
        self._winding.add(session.task)
        session.task.add_done_callback(self._winding.discard)
        try:
            async with asyncio.timeout(self.config.startup_timeout_s):
                await session.ready.wait()
                if session.failure is not None:
                    raise UpstreamUnavailable(self.name, session.failure)
                assert session.client is not None
                listed = await _list_tools(session.client)
        except TimeoutError:
            self._retire(session)
            raise UpstreamUnavailable(
                self.name, f"no answer within {self.config.startup_timeout_s:g} s"
            ) from None
        except MCPError as exc:
            self._retire(session)
            raise UpstreamUnavailable(
                self.name, f"tools/list failed: {exc.error.message}"
            ) from None
        except BaseException:
            self._retire(session)
            raise
        self._session = session
        self._current = {tool.name: _pinned_form(tool) for tool in listed}
        return listed

    def _retire(self, session: _Session) -> None:
        # Never awaited: a caller cut off mid-connect must not wait for a child to exit.
        session.stop.set()
        if not session.ready.is_set() and session.task is not None:
            # Still connecting, so not waiting for ``stop``: a server that never
            # answers would hold it for ever. The SDK's shutdown is shielded.
            session.task.cancel()
        if self._session is session:
            self._session = None

    async def _supervise(self, session: _Session) -> None:
        try:
            async with Client(
                self._transport(session), mode="auto", client_info=_CLIENT_INFO
            ) as client:
                session.client = client
                session.ready.set()
                await session.stop.wait()
        except Exception as exc:  # a server that fails or dies is contained here
            if session.ready.is_set():
                log.warning("the session to MCP server %r ended: %s", self.name, _reason(exc))
            else:
                session.failure = _reason(exc)
        finally:
            session.ended.set()
            session.ready.set()

    def _transport(self, session: _Session) -> Transport:
        if self.config.url is not None:
            return self._http(self.config.url)
        assert self.config.command is not None
        return self._stdio(self.config.command, session.ended)

    @asynccontextmanager
    async def _http(self, url: str) -> AsyncIterator[_Streams]:
        timeout = httpx2.Timeout(self.config.startup_timeout_s, read=None)
        async with (
            WatchedClient(self._sending, headers=self._headers, timeout=timeout) as http,
            streamable_http_client(url, http_client=http) as (read, write),
        ):
            yield read, write

    @asynccontextmanager
    async def _stdio(self, command: list[str], ended: asyncio.Event) -> AsyncIterator[_Streams]:
        parameters = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(parameters) as (read, write), _watched(read, ended) as watched:
            yield watched, write


@asynccontextmanager
async def _watched(
    inner: AsyncIterator[SessionMessage | Exception], ended: asyncio.Event
) -> AsyncIterator[anyio.abc.ObjectReceiveStream[SessionMessage | Exception]]:
    """``inner`` relayed, setting ``ended`` the moment it ends.

    ``ended`` is set before the session can see the end, so a call that finds
    the session dead knows it never sent anything on it.
    """
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        try:
            async for item in inner:
                await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            ended.set()
            await send.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(relay)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise MCPError(code=types.INTERNAL_ERROR, message="tools/list never reached its last page")


def _pinned_form(tool: types.Tool) -> dict[str, Any]:
    """What of a listed tool a definition is derived from: a change here is a new plan."""
    return tool.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        include={"name", "title", "description", "input_schema", "annotations"},
    )


def _reason(exc: BaseException) -> str:
    """One line about why a session failed; never a traceback."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return "the server exited or closed the connection"
        return exc.error.message
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__

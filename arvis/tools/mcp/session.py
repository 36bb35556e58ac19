"""One session to an upstream MCP server: the connection's state, and what is read of it.

:class:`Session` is what :class:`~arvis.tools.mcp.upstream.UpstreamServer` keeps of one
connection (the shared one, or a caller's: :mod:`arvis.tools.mcp.callers`); the functions
read its tool list, watch a stdio transport's end, and say in one line why it failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.shared.message import SessionMessage

# Bounds a tools/list walk, so a server whose cursors never end cannot hang start-up.
_MAX_LIST_PAGES = 100


class Session:
    """One connection to an upstream server and the supervisor task that owns it."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = dict(headers)
        """Sent on every request (a caller's session: with its token)."""
        self.http: httpx2.AsyncClient | None = None
        """A ``url`` session's HTTP client, once connecting began."""
        self.tools: dict[str, dict[str, Any]] = {}
        """The tools this session listed (their pinned form), once open."""
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
        return self.client is not None and not self.ended.is_set() and not self.stop.is_set()

    def send_as(self, bearer: str) -> None:
        """Send this session's requests from now on with ``bearer`` (a refreshed token of
        the same caller: the session is the person's, not one token's)."""
        assert self.http is not None
        self.http.headers["Authorization"] = f"Bearer {bearer}"


@asynccontextmanager
async def watched(
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


async def list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise MCPError(code=types.INTERNAL_ERROR, message="tools/list never reached its last page")


def pinned_form(tool: types.Tool) -> dict[str, Any]:
    """What of a listed tool a definition is derived from: a change here is a new plan."""
    return tool.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        include={"name", "title", "description", "input_schema", "annotations"},
    )


def reason(exc: BaseException) -> str:
    """One line about why a session failed; never a traceback."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return "the server exited or closed the connection"
        return exc.error.message
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__

"""One upstream MCP server (DESIGN §3): ARVIS is its MCP client.

An :class:`UpstreamServer` holds one pooled session for the whole process. A
supervisor task owns the session's context, because the SDK's task groups must
be entered and left by one task; calls from any task share the session. A server
with ``auth`` lists its tools at start-up on that session (its static headers), and
then sends each call on a session of the call's caller (:mod:`arvis.tools.mcp.callers`),
which must list the tool as the plan pinned it.

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
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import httpx2
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client

from arvis import __version__
from arvis.domain.errors import ArvisError, fields
from arvis.tools.mcp.callers import Caller, CallerSessions, CallerSlot
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.keys import CALL_ID
from arvis.tools.mcp.sending import SendProof, WatchedClient
from arvis.tools.mcp.session import Session, list_tools, pinned_form, reason, watched

log = logging.getLogger(__name__)

_CLIENT_INFO = types.Implementation(name="arvis", version=__version__)
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


class UpstreamChangedForCaller(UpstreamChanged):
    """On a caller's own session (a server with ``auth``) the server lists a tool
    differently from the plan: it describes its tools per person, so restarting ARVIS
    would pin the service's listing again, not this caller's."""

    template = (
        "the MCP server {server!r} describes {tool!r} to this caller differently from "
        "the tool plan (pinned from its listing at start-up); nothing was sent"
    )


class _Place(Protocol):
    """Where a session is kept: the shared one, or a caller's :class:`CallerSlot`."""

    session: Session | None
    lock: asyncio.Lock
    """Held while the session is being opened, so it is opened once."""


@dataclass(eq=False)
class _Shared:
    session: Session | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class UpstreamServer:
    """A declared upstream server: a supervised, restartable, shared client session."""

    def __init__(self, config: McpServerConfig, headers: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._headers = dict(headers or {})
        self._shared = _Shared()
        """Without ``auth``: the one session every call goes on."""
        self._pinned: dict[str, dict[str, Any]] = {}
        self._callers = CallerSessions[Session](config.user_sessions, self._retire)
        """With ``auth``: each caller's own session."""
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
        async with self._shared.lock:
            session, listed = await self._open(self._headers)
            self._pinned = dict(session.tools)
            if self.config.auth is None:
                self._shared.session = session
            else:
                # Its calls go on their callers' sessions: this one only listed the tools.
                self._retire(session)
        return listed

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        meta: dict[str, Any],
        caller: Caller | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        """Send one ``tools/call``: on the caller's own session when ``caller`` is given
        (a server with ``auth``), else on the shared one.

        :class:`UpstreamUnavailable` and :class:`UpstreamChanged` mean nothing was
        sent. Anything raised after that (an ``MCPError``, a timeout) comes from a
        request that may have reached the server.
        """
        if caller is None:
            if self.config.auth is not None:
                # Fail closed: its calls act for a person, never as the listing's service.
                raise UpstreamUnavailable(self.name, "a call without its caller's token")
            return await self._send(await self._ready(), tool, arguments, meta)
        slot = self._callers.enter(caller.key)
        try:
            session = await self._ready_for(slot, caller.bearer)
            return await self._send(session, tool, arguments, meta)
        finally:
            self._callers.leave(slot)

    async def _send(
        self, session: Session, tool: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        if session.tools.get(tool) != self._pinned.get(tool):
            # With ``auth`` every call is on a caller's own session (:meth:`call`).
            per_caller = self.config.auth is not None
            raise (UpstreamChangedForCaller if per_caller else UpstreamChanged)(self.name, tool)
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

    async def _ready(self) -> Session:
        """The shared live session, restarted if it died, as :meth:`_revive`."""
        return await self._revive(self._shared, self._headers)

    async def _ready_for(self, slot: CallerSlot[Session], bearer: str) -> Session:
        """The caller's live session, opened with ``bearer`` if it has none (or it died),
        as :meth:`_revive`; it sends ``bearer`` from now on."""
        headers = {**self._headers, "Authorization": f"Bearer {bearer}"}
        session = await self._revive(slot, headers)
        session.send_as(bearer)
        return session

    async def _revive(self, place: _Place, headers: Mapping[str, str]) -> Session:
        """The live session kept at ``place``, restarted with ``headers`` if it died (or
        there is none), within ``startup_timeout_s``: the shared session and a caller's
        are kept alike, and only what they send differs.

        The budget (waiting for another caller's restart included) keeps a call
        that never got to send from outliving the dispatcher's deadline, which
        could only classify it as uncertain.
        """
        budget = self.config.startup_timeout_s
        try:
            async with asyncio.timeout(budget), place.lock:
                session = place.session
                if session is None or not session.live:
                    if session is not None:
                        self._retire(session)
                    session, _ = await self._open(headers)
                    place.session = session
        except TimeoutError:
            raise UpstreamUnavailable(self.name, f"no live session within {budget:g} s") from None
        return session

    async def aclose(self) -> None:
        """Stop the session (a stdio child is asked to exit, then killed)."""
        self._closed = True
        if self._shared.session is not None:
            self._retire(self._shared.session)
        self._callers.close()
        if not self._winding:
            return
        _, pending = await asyncio.wait(set(self._winding), timeout=_CLOSE_TIMEOUT_S)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("the MCP server %r did not shut down in time", self.name)

    async def _open(self, headers: Mapping[str, str]) -> tuple[Session, list[types.Tool]]:
        """A fresh session sending ``headers``, with its tool list read; the caller holds
        the lock of the place it keeps the session."""
        if self._closed:
            raise UpstreamUnavailable(self.name, "ARVIS is shutting down")
        session = Session(headers)
        session.task = asyncio.create_task(self._supervise(session), name=f"mcp:{self.name}")
        self._winding.add(session.task)
        session.task.add_done_callback(self._winding.discard)
        try:
            async with asyncio.timeout(self.config.startup_timeout_s):
                await session.ready.wait()
                if session.failure is not None:
                    raise UpstreamUnavailable(self.name, session.failure)
                assert session.client is not None
                listed = await list_tools(session.client)
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
        if self._closed:
            # Shutdown began while it opened: nothing will close it but this.
            self._retire(session)
            raise UpstreamUnavailable(self.name, "ARVIS is shutting down")
        session.tools = {tool.name: pinned_form(tool) for tool in listed}
        return session, listed

    def _retire(self, session: Session) -> None:
        # Never awaited: a caller cut off mid-connect must not wait for a child to exit.
        session.stop.set()
        if not session.ready.is_set() and session.task is not None:
            # Still connecting, so not waiting for ``stop``: a server that never
            # answers would hold it for ever. The SDK's shutdown is shielded.
            session.task.cancel()
        if self._shared.session is session:
            self._shared.session = None

    async def _supervise(self, session: Session) -> None:
        try:
            async with Client(
                self._transport(session), mode="auto", client_info=_CLIENT_INFO
            ) as client:
                session.client = client
                session.ready.set()
                await session.stop.wait()
        except Exception as exc:  # a server that fails or dies is contained here
            if session.ready.is_set():
                log.warning("the session to MCP server %r ended: %s", self.name, reason(exc))
            else:
                session.failure = reason(exc)
        finally:
            session.ended.set()
            session.ready.set()

    def _transport(self, session: Session) -> Transport:
        if self.config.url is not None:
            return self._http(self.config.url, session)
        assert self.config.command is not None
        return self._stdio(self.config.command, session.ended)

    @asynccontextmanager
    async def _http(self, url: str, session: Session) -> AsyncIterator[_Streams]:
        timeout = httpx2.Timeout(self.config.startup_timeout_s, read=None)
        async with (
            WatchedClient(self._sending, headers=session.headers, timeout=timeout) as http,
            streamable_http_client(url, http_client=http) as (read, write),
        ):
            session.http = http
            yield read, write

    @asynccontextmanager
    async def _stdio(self, command: list[str], ended: asyncio.Event) -> AsyncIterator[_Streams]:
        parameters = StdioServerParameters(command=command[0], args=command[1:])
        async with stdio_client(parameters) as (read, write), watched(read, ended) as relayed:
            yield relayed, write

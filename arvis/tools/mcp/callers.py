"""Per-user sessions of an upstream MCP server with ``auth`` (issue 26).

A server that acts with its caller's authority sees each caller's exchanged token, and may
bind the session it issues to the user the token names (the MCP security best practices:
a session id is not an authentication, and a server keys it by ``<user>:<session>``). One
shared session carrying different people's tokens would be wrong there, and anywhere a
server keeps per-session state. So each caller — the (tenant, person, agent) of the sealed
context, as the token cache keys it — gets a session of its own, opened with its exchanged
token as ``Authorization: Bearer …`` and sent with the current one on every request.

**Decision: a refreshed token stays on its session.** When the cached token nears its
expiry the next call exchanges a new one for the same person and agent; it is sent on the
same session from that request on (the session's HTTP client carries it). The session
belongs to the person, not to one token: MCP's authorization has the client send its token
on every request and the server check each, and replacing the session on every refresh
would cut off that person's calls in flight or re-initialise once per token lifetime.

**Bounded.** At most ``user_sessions`` (default 32) idle sessions are kept; past that the
least recently used idle one is closed. A session with a caller in it (waiting to open, or
a call in flight) is never closed under it, so the map can outgrow the bound only by the
calls in flight at that moment, and shrinks back as they end.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from arvis.tools.credentials import CallerKey

S = TypeVar("S")


@dataclass(frozen=True)
class Caller:
    """Who a call is sent for and the token it is sent with (never shown)."""

    key: CallerKey
    bearer: str = field(repr=False)


@dataclass(eq=False)
class CallerSlot(Generic[S]):
    """One caller's session, and the callers using it right now."""

    key: CallerKey
    session: S | None = None
    users: int = 0
    """Callers between :meth:`CallerSessions.enter` and :meth:`CallerSessions.leave`."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while the caller's session is being opened, so it is opened once."""


class CallerSessions(Generic[S]):
    """The callers' sessions of one server, the least recently used idle ones closed
    past ``bound``; ``retire`` closes a session (it never waits)."""

    def __init__(self, bound: int, retire: Callable[[S], None]) -> None:
        self.bound = bound
        self._retire = retire
        self._slots: OrderedDict[CallerKey, CallerSlot[S]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._slots)

    def enter(self, key: CallerKey) -> CallerSlot[S]:
        """The caller's slot, marked in use until :meth:`leave` (no await in between, so
        it cannot be closed before its user holds it)."""
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = CallerSlot(key)
        self._slots.move_to_end(key)
        slot.users += 1
        self._trim()
        return slot

    def leave(self, slot: CallerSlot[S]) -> None:
        slot.users -= 1
        self._trim()

    def close(self) -> None:
        """Close every session (at shutdown)."""
        slots, self._slots = list(self._slots.values()), OrderedDict()
        for slot in slots:
            if slot.session is not None:
                self._retire(slot.session)

    def _trim(self) -> None:
        while len(self._slots) > self.bound:
            idle = next((slot for slot in self._slots.values() if slot.users == 0), None)
            if idle is None:
                return  # every slot has a caller in it: none is closed under a call
            del self._slots[idle.key]
            if idle.session is not None:
                self._retire(idle.session)

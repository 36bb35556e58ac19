"""Pieces for testing :mod:`arvis.client`: transports that lose answers, clients per role.

A losing transport sends the request for real and reads ARVIS's whole answer, then
throws the answer away and raises ``httpx.ReadError`` — what a client sees when the
connection drops after the server committed. Everything it sent is kept, so a test can
check that a re-post was byte for byte the same request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from arvis.client import AsyncArvisClient, RetryPolicy
from tests.support.http import Api

FAST_RETRY = RetryPolicy(total_s=30, initial_backoff_s=0.02, max_backoff_s=0.2)
"""Patient enough to ride out a restart, quick enough for a test."""


@dataclass
class Losses:
    """What to lose, and what was sent."""

    path: str = "/v1/syscalls"
    remaining: int = 0
    then: Callable[[], None] | None = None
    """Called after an answer was lost (e.g. kill the server)."""
    sent: list[tuple[str, bytes]] = field(default_factory=list)
    """``(path, body)`` of every request that reached the transport."""
    lost: int = 0

    def lose(self, count: int = 1, then: Callable[[], None] | None = None) -> None:
        self.remaining = count
        self.then = then

    def bodies(self, path: str | None = None) -> list[bytes]:
        return [body for sent_path, body in self.sent if sent_path == (path or self.path)]

    def _after(self, request: httpx.Request) -> None:
        if request.url.path != self.path or self.remaining <= 0:
            return
        self.remaining -= 1
        self.lost += 1
        if self.then is not None:
            self.then()
        raise httpx.ReadError("connection reset after the request was sent", request=request)


class LosingTransport(httpx.BaseTransport):
    """A real HTTP transport that loses the answers it is told to lose."""

    def __init__(self, losses: Losses) -> None:
        self.losses = losses
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.losses.sent.append((request.url.path, request.read()))
        response = self._inner.handle_request(request)
        response.read()
        response.close()
        self.losses._after(request)
        return response

    def close(self) -> None:
        self._inner.close()


class LosingAsyncTransport(httpx.AsyncBaseTransport):
    """The asyncio twin of :class:`LosingTransport`, around any async transport."""

    def __init__(self, losses: Losses, inner: httpx.AsyncBaseTransport) -> None:
        self.losses = losses
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.losses.sent.append((request.url.path, await request.aread()))
        response = await self._inner.handle_async_request(request)
        await response.aread()
        await response.aclose()
        self.losses._after(request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def asgi_client(
    api: Api,
    who: str = "acme:agent",
    *,
    losses: Losses | None = None,
    retry: RetryPolicy | None = FAST_RETRY,
) -> AsyncArvisClient:
    """An :class:`AsyncArvisClient` on the in-process app, with ``who``'s key."""
    transport: httpx.AsyncBaseTransport = httpx.ASGITransport(app=api.app)
    if losses is not None:
        transport = LosingAsyncTransport(losses, transport)
    return AsyncArvisClient("http://arvis.test", api.tokens[who], transport=transport, retry=retry)

"""The asyncio client: :class:`AsyncArvisClient`, method for method the blocking one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

import httpx

from arvis.client import _admin, _calls
from arvis.client._admin import ApiKey, CreatedKey, RunFilters, RunsPage
from arvis.client._base import BaseClient
from arvis.client._calls import Call, P, Pages, SyscallAnswer
from arvis.client.errors import ArvisClientError
from arvis.client.models import (
    Bundle,
    Confirmation,
    ConfirmationPage,
    ConfirmationState,
    JournalEntry,
    JournalPage,
    ReplayPage,
    Resolution,
    ToolPlan,
    Verification,
)
from arvis.client.retry import RetryPolicy

__all__ = ["AsyncArvisClient"]

T = TypeVar("T")
ItemT = TypeVar("ItemT")


class AsyncArvisClient(BaseClient[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """:class:`~arvis.client.ArvisClient` from asyncio, method for method: the same
    requests, answers, errors and retries, awaited."""

    def _open(self, **settings: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(**settings)

    async def __aenter__(self) -> AsyncArvisClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def execute(
        self,
        run_id: str,
        causal_id: str,
        tool: str,
        payload: Mapping[str, Any],
        *,
        retry: RetryPolicy | None = None,
    ) -> SyscallAnswer:
        """Govern one ``tool.execute``: ``Executed``, ``Deduplicated``, ``Refused`` or
        ``ConfirmationRequired``. A lost answer is re-posted with the same ids, never a
        new causal id; after :class:`~arvis.client.errors.RetryExhausted` with
        ``outcome_unknown``, re-post the same call later to learn what happened."""
        return await self._send(_calls.syscall(run_id, causal_id, tool, payload), retry)

    async def tools(self) -> ToolPlan:
        """The current plan's definitions."""
        return await self._send(_calls.tools())

    async def journal(self, run_id: str, *, after: int = 0, limit: int = 100) -> JournalPage:
        """One page of the run's journal (auditor); ``limit`` ≤ 1000."""
        return await self._send(_calls.journal(run_id, after, limit))

    def iter_journal(self, run_id: str, *, page_size: int = 1000) -> AsyncIterator[JournalEntry]:
        """Every entry of the run's journal, in chain order, page by page."""
        return self._each(_calls.journal_pages(run_id, page_size))

    async def verify(self, run_id: str) -> Verification:
        """Recompute the run's chain and say where, if anywhere, it breaks (auditor)."""
        return await self._send(_calls.verify(run_id))

    async def replay(self, run_id: str, *, after: int = 0, limit: int = 100) -> ReplayPage:
        """One page of the run's recorded results (agent, auditor). Runs nothing; a broken
        chain raises :class:`~arvis.client.errors.ChainBroken`."""
        return await self._send(_calls.replay(run_id, after, limit))

    def iter_replay(self, run_id: str, *, page_size: int = 1000) -> AsyncIterator[SyscallAnswer]:
        """Every recorded result of the run, page by page."""
        return self._each(_calls.replay_pages(run_id, page_size))

    async def confirmations(
        self,
        *,
        state: ConfirmationState | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> ConfirmationPage:
        """One page of this tenant's confirmations (approver), e.g. ``state="PENDING"``."""
        return await self._send(_calls.confirmations(state, limit, after))

    def iter_confirmations(
        self, *, state: ConfirmationState | None = None, page_size: int = 500
    ) -> AsyncIterator[Confirmation]:
        """Every confirmation in ``state``, page by page."""
        return self._each(_calls.confirmation_pages(state, page_size))

    async def approve(self, confirmation_id: str, *, reason: str | None = None) -> Confirmation:
        """PENDING → APPROVED (approver; never one's own request: ``SelfApproval``). The
        agent then re-posts the same syscall to run it."""
        return await self._send(_calls.decide(confirmation_id, "approve", reason))

    async def deny(self, confirmation_id: str, *, reason: str | None = None) -> Confirmation:
        """PENDING or APPROVED → DENIED; the decision is refused for ever."""
        return await self._send(_calls.decide(confirmation_id, "deny", reason))

    async def resolve(
        self, run_id: str, idempotency_key: str, attempt: int, *, as_: str, evidence: str
    ) -> Resolution:
        """Say what an uncertain attempt did (approver; never one's own call): ``as_`` is
        ``completed``, ``failed`` or ``not_started``; ``evidence`` is journaled as given."""
        return await self._send(_calls.resolve(run_id, idempotency_key, attempt, as_, evidence))

    async def bundle(self, run_id: str) -> Bundle:
        """The run's self-contained audit bundle (auditor), for ``arvis verify --bundle``."""
        return await self._send(_calls.bundle(run_id))

    # The runs list and key management (arvis.client._admin).

    async def runs(
        self,
        *,
        cursor: str | None = None,
        limit: int = 100,
        **filters: Unpack[RunFilters],
    ) -> RunsPage:
        """One page of this tenant's runs (auditor), newest first; every filter of
        ``GET /v1/runs`` holds at once: ``status``, ``principal`` and ``actor`` (an agent
        that acted for it) exactly, ``tool``, ``q`` (a part of the run id), the start
        and the last activity (at or after / before; a time without offset is UTC)."""
        return await self._send(_admin.runs(cursor, limit, filters))

    async def keys(self) -> list[ApiKey]:
        """This tenant's API keys, never their secrets (admin)."""
        return (await self._send(_admin.keys())).keys

    async def create_key(
        self, principal: str, roles: Sequence[str], *, groups: Sequence[str] = ()
    ) -> CreatedKey:
        """A new key of this tenant (admin); its ``token`` is in this answer only."""
        return await self._send(_admin.create_key(principal, roles, groups))

    async def revoke_key(self, key_id: str) -> None:
        """Revoke a key of this tenant (admin): requests with it are refused from now on."""
        await self._send(_admin.revoke_key(key_id))

    async def _send(self, call: Call[T], retry: RetryPolicy | None = None) -> T:
        attempts = (retry or self.retry).start()
        while True:
            attempts.attempt()
            try:
                return await self._once(call)
            except ArvisClientError as error:
                delay = self._delay(attempts, call, error)
            await asyncio.sleep(delay)

    async def _each(self, pages: Pages[P, ItemT]) -> AsyncIterator[ItemT]:
        after = pages.first
        while True:
            page = await self._send(pages.call(after))
            for item in pages.items(page):
                yield item
            after = page.next_after
            if after is None:
                return

    async def _once(self, call: Call[T]) -> T:
        try:
            response = await self._http.send(_calls.request(self._http, call))
        except httpx.TransportError as exc:
            raise _calls.transport_error(exc) from exc
        return _calls.read(call, response)

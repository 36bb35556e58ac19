"""The blocking client: :class:`ArvisClient`."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
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

__all__ = ["ArvisClient"]

T = TypeVar("T")
ItemT = TypeVar("ItemT")


class ArvisClient(BaseClient[httpx.Client, httpx.BaseTransport]):
    """ARVIS over HTTP, with one bearer key (which fixes tenant, principal and roles).

    Every method sends one request of docs/http.md and answers its typed value; a problem
    answer raises its :class:`~arvis.client.errors.ArvisProblem` subclass. Requests that
    are harmless to repeat (``execute`` by design, the reads, ``replay``) are re-posted
    unchanged under ``retry`` after a lost answer or a retryable problem; ``approve`` and
    ``deny`` only when they certainly did nothing.

    ``timeout`` should exceed the server's ``ARVIS_REQUEST_TIMEOUT_S`` (30 s by default),
    so a slow call is answered by ARVIS (``request_timeout``) rather than abandoned here.
    ``transport`` replaces httpx's (a proxy, a test transport).
    """

    def _open(self, **settings: Any) -> httpx.Client:
        return httpx.Client(**settings)

    def __enter__(self) -> ArvisClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def execute(
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
        return self._send(_calls.syscall(run_id, causal_id, tool, payload), retry)

    def tools(self) -> ToolPlan:
        """The current plan's definitions."""
        return self._send(_calls.tools())

    def journal(self, run_id: str, *, after: int = 0, limit: int = 100) -> JournalPage:
        """One page of the run's journal (auditor); ``limit`` ≤ 1000."""
        return self._send(_calls.journal(run_id, after, limit))

    def iter_journal(self, run_id: str, *, page_size: int = 1000) -> Iterator[JournalEntry]:
        """Every entry of the run's journal, in chain order, page by page."""
        return self._each(_calls.journal_pages(run_id, page_size))

    def verify(self, run_id: str) -> Verification:
        """Recompute the run's chain and say where, if anywhere, it breaks (auditor)."""
        return self._send(_calls.verify(run_id))

    def replay(self, run_id: str, *, after: int = 0, limit: int = 100) -> ReplayPage:
        """One page of the run's recorded results (agent, auditor). Runs nothing; a broken
        chain raises :class:`~arvis.client.errors.ChainBroken`."""
        return self._send(_calls.replay(run_id, after, limit))

    def iter_replay(self, run_id: str, *, page_size: int = 1000) -> Iterator[SyscallAnswer]:
        """Every recorded result of the run, page by page."""
        return self._each(_calls.replay_pages(run_id, page_size))

    def confirmations(
        self,
        *,
        state: ConfirmationState | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> ConfirmationPage:
        """One page of this tenant's confirmations (approver), e.g. ``state="PENDING"``."""
        return self._send(_calls.confirmations(state, limit, after))

    def iter_confirmations(
        self, *, state: ConfirmationState | None = None, page_size: int = 500
    ) -> Iterator[Confirmation]:
        """Every confirmation in ``state``, page by page."""
        return self._each(_calls.confirmation_pages(state, page_size))

    def approve(self, confirmation_id: str, *, reason: str | None = None) -> Confirmation:
        """PENDING → APPROVED (approver; never one's own request: ``SelfApproval``). The
        agent then re-posts the same syscall to run it."""
        return self._send(_calls.decide(confirmation_id, "approve", reason))

    def deny(self, confirmation_id: str, *, reason: str | None = None) -> Confirmation:
        """PENDING or APPROVED → DENIED; the decision is refused for ever."""
        return self._send(_calls.decide(confirmation_id, "deny", reason))

    def resolve(
        self, run_id: str, idempotency_key: str, attempt: int, *, as_: str, evidence: str
    ) -> Resolution:
        """Say what an uncertain attempt did (approver; never one's own call): ``as_`` is
        ``completed``, ``failed`` or ``not_started``; ``evidence`` is journaled as given."""
        return self._send(_calls.resolve(run_id, idempotency_key, attempt, as_, evidence))

    def bundle(self, run_id: str) -> Bundle:
        """The run's self-contained audit bundle (auditor), for ``arvis verify --bundle``."""
        return self._send(_calls.bundle(run_id))

    # The runs list and key management (arvis.client._admin).

    def runs(
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
        return self._send(_admin.runs(cursor, limit, filters))

    def keys(self) -> list[ApiKey]:
        """This tenant's API keys, never their secrets (admin)."""
        return self._send(_admin.keys()).keys

    def create_key(
        self, principal: str, roles: Sequence[str], *, groups: Sequence[str] = ()
    ) -> CreatedKey:
        """A new key of this tenant (admin); its ``token`` is in this answer only."""
        return self._send(_admin.create_key(principal, roles, groups))

    def revoke_key(self, key_id: str) -> None:
        """Revoke a key of this tenant (admin): requests with it are refused from now on."""
        self._send(_admin.revoke_key(key_id))

    def _send(self, call: Call[T], retry: RetryPolicy | None = None) -> T:
        attempts = (retry or self.retry).start()
        while True:
            attempts.attempt()
            try:
                return self._once(call)
            except ArvisClientError as error:
                delay = self._delay(attempts, call, error)
            time.sleep(delay)

    def _each(self, pages: Pages[P, ItemT]) -> Iterator[ItemT]:
        after = pages.first
        while True:
            page = self._send(pages.call(after))
            yield from pages.items(page)
            after = page.next_after
            if after is None:
                return

    def _once(self, call: Call[T]) -> T:
        try:
            response = self._http.send(_calls.request(self._http, call))
        except httpx.TransportError as exc:
            raise _calls.transport_error(exc) from exc
        return _calls.read(call, response)

"""Storage ports of the lifecycle (DESIGN §2 "one writer, one decider").

Python decides; the store writes. Every lifecycle write step is one store
operation — one server-side function, one round trip, one commit — called from
one place: :meth:`LifecycleStore.admit` (admission), :meth:`~LifecycleStore.journal`
(every journal entry: refusals, settlements, recoveries, consent decisions, each
with the state changes that go with it), :meth:`~LifecycleStore.request_consent`,
:meth:`~LifecycleStore.mark_started`, :meth:`~LifecycleStore.resolve` and
:meth:`~LifecycleStore.approve` (issue 16), and the lease operations. Reads that
must see one snapshot go through :meth:`~LifecycleStore.reading`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol

from arvis.domain.checkpoints import Checkpoint
from arvis.domain.ids import (
    ConfirmationId,
    IdempotencyKey,
    RunId,
    TenantId,
)
from arvis.domain.intent import AuditReceipt, Intent
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.records import (
    BudgetUsage,
    ChainRow,
    ConfirmationRecord,
    DecisionHistory,
    InFlightAttempt,
    JournalEntry,
    RunRecord,
    RunSummary,
    UncertainAttempt,
)
from arvis.lifecycle.runs import RunQuery
from arvis.lifecycle.writes import (
    Admission,
    AdmitAnswer,
    AppendAnswer,
    ApprovalStep,
    ApproveAnswer,
    ConsentAnswer,
    ConsentRequest,
    JournalAppend,
    Resolution,
    ResolveAnswer,
)


class LifecycleReads(Protocol):
    """Reads inside one read-only snapshot (one transaction)."""

    async def run(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None: ...

    async def entry_at(
        self, tenant_id: TenantId, run_id: RunId, position: int
    ) -> JournalEntry | None: ...

    async def page(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[JournalEntry]: ...

    async def chain(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[ChainRow]:
        """What verification reads, as plain tuples, in position order."""
        ...

    async def checkpoints(
        self,
        tenant_id: TenantId,
        run_id: RunId,
        *,
        at_least: int = 0,
        first: int | None = None,
        last: int | None = None,
    ) -> list[Checkpoint]:
        """The run's signed checkpoints of ``at_least`` entries or more, oldest first;
        only the ``first`` oldest or the ``last`` newest of them when given."""
        ...

    async def in_flight_intents(self, tenant_id: TenantId, run_id: RunId) -> set[str]:
        """The intent ids of the run's attempts admitted and not yet journaled."""
        ...

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord | None: ...

    async def confirmations(
        self, tenant_id: TenantId, state: ConfirmationState | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]: ...

    async def run_confirmations(
        self, tenant_id: TenantId, run_id: RunId, state: ConfirmationState, limit: int
    ) -> list[ConfirmationRecord]:
        """The run's confirmations in ``state``, oldest first."""
        ...

    async def payloads(
        self, tenant_id: TenantId, run_id: RunId, causal_ids: Sequence[str]
    ) -> dict[str, Any]:
        """The frozen arguments the run's decisions keep, by causal id (as stored:
        ``[journal] redact`` fields are their digests; None before revision 0005)."""
        ...

    async def attempt_entry(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> JournalEntry | None:
        """The entry that settled ``attempt`` of ``key`` in that run, if any."""
        ...

    async def uncertain(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> UncertainAttempt | None:
        """The attempt when it was journaled uncertain, resolved or not."""
        ...

    async def budget_usage(
        self, tenant_id: TenantId, windows: Sequence[tuple[str, datetime]]
    ) -> list[BudgetUsage]:
        """The used amounts of the tenant's rows in the given (budget, window start)s."""
        ...

    async def runs(self, tenant_id: TenantId, query: RunQuery) -> list[RunSummary]:
        """The tenant's runs that ``query`` selects, newest first: up to one more than
        ``query.limit`` (so the caller knows whether another page follows)."""
        ...


class LifecycleStore(Protocol):
    @property
    def fingerprint(self) -> str: ...

    async def admit(self, admission: Admission) -> AdmitAnswer: ...

    async def journal(self, append: JournalAppend) -> AppendAnswer: ...

    async def request_consent(self, request: ConsentRequest) -> ConsentAnswer: ...

    async def history(
        self, tenant_id: TenantId, run_id: RunId, causal_id: str, key: IdempotencyKey
    ) -> DecisionHistory: ...

    async def mark_started(self, tenant_id: TenantId, key: IdempotencyKey, attempt: int) -> None:
        """Record, durably and at once, that the attempt's tool reported its start."""
        ...

    async def resolve(self, resolution: Resolution) -> ResolveAnswer: ...

    async def approve(self, step: ApprovalStep) -> ApproveAnswer: ...

    async def open_uncertain(self, *, limit: int, max_asks: int) -> list[UncertainAttempt]:
        """Unresolved uncertain attempts whose next reconcile ask is due."""
        ...

    async def record_ask(
        self, tenant_id: TenantId, key: str, attempt: int, next_in_s: float
    ) -> None:
        """A reconcile hook was asked about the attempt and said nothing definite."""
        ...

    async def expirable(self, *, limit: int) -> list[ConfirmationRecord]:
        """Waiting confirmations (PENDING, APPROVED) expired by the database's clock."""
        ...

    async def in_flight(self, *, limit: int, owner: str | None = None) -> list[InFlightAttempt]:
        """In-flight attempts of lease name ``owner``, else of every owner whose lease
        expired or was released (DESIGN §6)."""
        ...

    async def attempt(self, tenant_id: TenantId, key: IdempotencyKey) -> InFlightAttempt | None:
        """The attempt of ``key`` in flight, whoever owns it."""
        ...

    def reading(self) -> AbstractAsyncContextManager[LifecycleReads]: ...

    async def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take ``name`` for ``holder`` until now + ``ttl_s`` (database time) if it is
        free: never held, released, or expired."""
        ...

    async def beat_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Extend ``name`` while ``holder`` still holds it; False when it does not."""
        ...

    async def release_lease(self, name: str, holder: str) -> bool:
        """Give ``name`` back while ``holder`` holds it (its own, or a dead holder's it
        takes over); False when ``holder`` does not hold it."""
        ...

    async def live_leases(self, instance_id: str) -> list[tuple[str, str]]:
        """(name, holder) of every live lease whose name is under ``instance_id/``:
        not released, not expired (database time)."""
        ...


class AuditSink(Protocol):
    """A qualified audit sink other than the store itself: durably records an intent
    before admission commits, and answers its receipt (DESIGN §1)."""

    async def record(self, intent: Intent) -> AuditReceipt: ...

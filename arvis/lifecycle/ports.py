"""Storage ports of the lifecycle. ``arvis.store`` implements them on PostgreSQL.

Each method is one statement inside the caller's unit of work; only the
lifecycle opens units of work, and leaving one without ``commit()`` rolls back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import ArvisError
from arvis.domain.ids import (
    CapabilityId,
    ConfirmationId,
    IdempotencyKey,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)


class CausalIdConflict(ArvisError):
    """One causal id names one decision for ever (DESIGN §4)."""

    code = "causal_id_conflict"

    def __init__(self, run_id: str, causal_id: str) -> None:
        super().__init__(
            f"causal id {causal_id!r} of run {run_id!r} already names another decision; "
            "a corrected decision needs a new causal id"
        )


@dataclass(frozen=True, slots=True)
class RunRecord:
    tenant_id: TenantId
    run_id: RunId
    plan_id: PlanId
    journal_length: int
    journal_head: str
    audit_incomplete: bool


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One logical action (one idempotency key) and its latest attempt."""

    idempotency_key: IdempotencyKey
    run_id: RunId
    causal_id: str
    tool: str
    attempts: int
    in_flight: bool
    last_boundary: EffectBoundary | None
    last_retryable: bool | None
    last_position: int | None


@dataclass(frozen=True, slots=True)
class ConfirmationRecord:
    confirmation_id: ConfirmationId
    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    idempotency_key: IdempotencyKey
    tool: str
    payload: Any
    state: str
    context: dict[str, Any]
    decided_by: str | None
    decision_reason: str | None
    decided_at: datetime | None
    expires_at: datetime
    created_at: datetime

    @property
    def requested_by(self) -> str:
        """The principal the consent was asked for (sealed in its context)."""
        return str(self.context.get("principal_id", ""))

    def requested_for(self, tenant_id: str, principal_id: str) -> bool:
        """True when this consent was asked by that principal of that tenant.

        Consent is bound to its requester in every state (DESIGN §4).
        """
        return (
            str(self.context.get("tenant_id", "")) == tenant_id
            and self.requested_by == principal_id
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    tenant_id: TenantId
    run_id: RunId
    position: int
    kind: str
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: str | None
    body_text: str
    """The canonical (RFC 8785) body, byte for byte what the chain hashes."""
    prev_hash: str
    entry_hash: str
    recorded_at: datetime

    @property
    def body(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body_text)
        return loaded


ChainRow = tuple[int, str, str, str, str, str, int | None, str | None, str | None, datetime, str]
"""(position, prev_hash, entry_hash, kind, causal_id, idempotency_key, attempt,
intent_id, boundary, recorded_at, body_text)"""


@dataclass(frozen=True, slots=True)
class UnsettledIntent:
    """An intent whose result was never journaled, as recovery finds it."""

    tenant_id: TenantId
    intent_id: IntentId
    run_id: RunId
    causal_id: str
    idempotency_key: IdempotencyKey
    attempt: int
    tool: str
    capability_id: CapabilityId
    confirmation_id: ConfirmationId | None
    commitment: str
    receipt_position: int
    instance_id: str
    started: bool
    """The tool durably reported that its effect started."""


class RunRepository(Protocol):
    async def get(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None: ...

    async def create(self, tenant_id: TenantId, run_id: RunId, plan_id: PlanId) -> RunRecord:
        """Insert the run unless it exists; return the stored row either way."""
        ...

    async def lock(self, tenant_id: TenantId, run_id: RunId) -> RunRecord:
        """The run row under FOR UPDATE: the journal's append lock."""
        ...

    async def advance(self, tenant_id: TenantId, run_id: RunId, length: int, head: str) -> None: ...

    async def flag_audit_incomplete(
        self, tenant_id: TenantId, run_id: RunId, reason: str
    ) -> None: ...


class ActionRepository(Protocol):
    async def claim(
        self,
        tenant_id: TenantId,
        key: IdempotencyKey,
        run_id: RunId,
        causal_id: str,
        tool: str,
        payload_digest: str,
    ) -> ActionRecord:
        """The action row of ``key`` under FOR UPDATE, created when new.

        Raises :class:`CausalIdConflict` when the run's causal id already names
        another decision; the unit of work is then spoiled and must be left.
        """
        ...

    async def get(self, tenant_id: TenantId, key: IdempotencyKey) -> ActionRecord | None: ...

    async def begin_attempt(
        self, tenant_id: TenantId, key: IdempotencyKey, attempt: int
    ) -> None: ...

    async def record_refusal(
        self, tenant_id: TenantId, key: IdempotencyKey, attempt: int, position: int
    ) -> None: ...

    async def settle(
        self,
        tenant_id: TenantId,
        key: IdempotencyKey,
        attempt: int,
        boundary: EffectBoundary,
        retryable: bool,
        position: int,
    ) -> None: ...


class CapabilityRepository(Protocol):
    async def mint(
        self,
        tenant_id: TenantId,
        capability_id: CapabilityId,
        run_id: RunId,
        key: IdempotencyKey,
        attempt: int,
        manager_id: str,
    ) -> None: ...

    async def activate(
        self, tenant_id: TenantId, capability_id: CapabilityId, receipt_position: int
    ) -> bool:
        """MINTED → ACTIVE carrying the receipt; False when not MINTED."""
        ...

    async def consume(
        self, tenant_id: TenantId, capability_id: CapabilityId, manager_id: str
    ) -> bool:
        """ACTIVE → CONSUMED for this manager only; False when zero rows changed."""
        ...

    async def revoke(self, tenant_id: TenantId, capability_id: CapabilityId, reason: str) -> bool:
        """MINTED or ACTIVE → REVOKED."""
        ...

    async def state(self, tenant_id: TenantId, capability_id: CapabilityId) -> str | None: ...


class IntentRepository(Protocol):
    async def settle(
        self, tenant_id: TenantId, intent_id: IntentId, boundary: EffectBoundary
    ) -> bool: ...

    async def unsettled(
        self,
        *,
        limit: int,
        owner: str | None = None,
        intent: tuple[TenantId, IntentId] | None = None,
    ) -> list[UnsettledIntent]:
        """Unsettled intents under FOR UPDATE SKIP LOCKED: that one ``intent`` when
        given, else of lease name ``owner`` when given, else of every owner whose
        lease expired or was released."""
        ...

    async def run_of(self, tenant_id: TenantId, intent_id: IntentId) -> RunId | None: ...

    async def mark_started(self, tenant_id: TenantId, intent_id: IntentId) -> None:
        """Record, durably, that the intent's tool reported its effect started."""
        ...


class ConfirmationRepository(Protocol):
    async def get(
        self, tenant_id: TenantId, key: IdempotencyKey, *, for_update: bool
    ) -> ConfirmationRecord | None: ...

    async def by_id(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, *, for_update: bool
    ) -> ConfirmationRecord | None: ...

    async def create_pending(
        self,
        record: ConfirmationRecord,
        payload_digest: str,
    ) -> ConfirmationRecord: ...

    async def transition(
        self,
        tenant_id: TenantId,
        confirmation_id: ConfirmationId,
        from_states: tuple[str, ...],
        to_state: str,
        *,
        decided_by: str | None = None,
        reason: str | None = None,
        decided_at: datetime | None = None,
    ) -> bool:
        """Conditional state change; False when the row was not in ``from_states``."""
        ...

    async def list(
        self, tenant_id: TenantId, state: str | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]: ...


class JournalRepository(Protocol):
    async def append(
        self,
        *,
        tenant_id: TenantId,
        run_id: RunId,
        kind: str,
        causal_id: str,
        idempotency_key: IdempotencyKey,
        attempt: int | None,
        intent_id: str | None,
        boundary: str | None,
        body_text: str,
        recorded_at: datetime,
    ) -> JournalEntry:
        """Append to the run's chain under its row lock (one statement).

        The same result for the same attempt again answers the stored entry; a
        different one raises :class:`~arvis.lifecycle.errors.JournalConflict`.
        """
        ...

    async def for_attempt(
        self, tenant_id: TenantId, key: IdempotencyKey, attempt: int
    ) -> JournalEntry | None: ...

    async def at(
        self, tenant_id: TenantId, run_id: RunId, position: int
    ) -> JournalEntry | None: ...

    async def page(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[JournalEntry]: ...

    async def chain(
        self, run_id: RunId, tenant_id: TenantId, after: int, limit: int
    ) -> list[ChainRow]:
        """What verification reads, as plain tuples, in position order."""
        ...


class LeaseRepository(Protocol):
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take ``name`` for ``holder`` until now + ``ttl_s`` (database time) if it is
        free: never held, released, or expired. False when a live holder has it."""
        ...

    async def beat(self, name: str, holder: str, ttl_s: float) -> bool:
        """Extend ``name`` while ``holder`` still holds it; False when it does not."""
        ...

    async def release(self, name: str, holder: str) -> None: ...


@dataclass(frozen=True, slots=True)
class FastAdmission:
    status: str
    """``admitted``, ``plan_mismatch`` or ``existing``."""
    receipt_position: int | None
    run_plan: str | None


class FastPath(Protocol):
    """The hot path: a first, authorized attempt admitted in one statement, and the
    journal transaction in one statement. Implemented by the PostgreSQL store with
    its own audit sink fused into the admission statement."""

    async def admit(
        self,
        *,
        tenant_id: str,
        run_id: str,
        plan_id: str,
        causal_id: str,
        idempotency_key: str,
        tool: str,
        payload_digest: str,
        capability_id: str,
        manager_id: str,
        intent_id: str,
        payload_text: str,
        commitment: str,
        context_json: str,
        instance_id: str,
    ) -> FastAdmission: ...

    async def journal_execution(
        self,
        *,
        tenant_id: str,
        run_id: str,
        causal_id: str,
        idempotency_key: str,
        attempt: int,
        intent_id: str,
        boundary: str,
        body_text: str,
        recorded_at: datetime,
        retryable: bool,
        confirmation_id: str | None,
    ) -> JournalEntry: ...


class AuditSink(Protocol):
    """A qualified audit sink: durably records an intent, answers a receipt."""

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt: ...


class LifecycleUnitOfWork(Protocol):
    """One transaction with the repositories bound to it."""

    @property
    def runs(self) -> RunRepository: ...
    @property
    def actions(self) -> ActionRepository: ...
    @property
    def capabilities(self) -> CapabilityRepository: ...
    @property
    def intents(self) -> IntentRepository: ...
    @property
    def confirmations(self) -> ConfirmationRepository: ...
    @property
    def journal(self) -> JournalRepository: ...
    @property
    def leases(self) -> LeaseRepository: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def commit(self) -> None: ...


class LifecycleStore(Protocol):
    @property
    def fingerprint(self) -> str: ...

    def unit_of_work(self) -> LifecycleUnitOfWork: ...

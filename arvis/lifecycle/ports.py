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

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, Protocol

from arvis.domain.authorization import PolicyRecord
from arvis.domain.boundary import EffectBoundary
from arvis.domain.checkpoints import Checkpoint
from arvis.domain.ids import (
    CapabilityId,
    ConfirmationId,
    IdempotencyKey,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)
from arvis.domain.intent import AuditReceipt, Intent
from arvis.domain.journal import (
    ConsentArtifact,
    Decider,
    JournalArtifact,
    JournalKind,
    ResolutionArtifact,
    read_artifact,
)
from arvis.domain.states import ConfirmationState, check_confirmation_transition
from arvis.lifecycle.policy.budgets import BudgetCharge


@dataclass(frozen=True, slots=True)
class RunRecord:
    tenant_id: TenantId
    run_id: RunId
    plan_id: PlanId
    journal_length: int
    journal_head: str
    audit_incomplete: bool
    principal_id: str | None = None
    """The principal the run is bound to (revision 0010; None: a run from before it
    that recorded no principal anywhere, bound by its next syscall)."""
    evidence_broken_at: int | None = None
    """The first position at which the run's evidence was found broken (issue 23);
    None: nothing was found. Served answers of a flagged run are refused."""
    evidence_fault: str | None = None
    """What was found there, by whom and when."""


@dataclass(frozen=True, slots=True)
class Approval:
    """One approver's approval of a confirmation, from its authentication."""

    principal_id: str
    auth_method: str
    key_id: str | None
    groups: tuple[str, ...]
    decided_at: datetime
    position: int
    """The journal entry that records it."""


@dataclass(frozen=True, slots=True)
class ConfirmationRecord:
    confirmation_id: ConfirmationId
    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    idempotency_key: IdempotencyKey
    tool: str
    payload: Any
    state: ConfirmationState
    context: dict[str, Any]
    decided_by: str | None
    decision_reason: str | None
    decided_at: datetime | None
    expires_at: datetime
    created_at: datetime
    approver_groups: tuple[str, ...] = ()
    """Groups one of which an approver's key must hold (empty: any approver)."""
    quorum: int = 1
    definition_fingerprint: str | None = None
    """The tool's definition when consent was asked (None: asked before revision 0006)."""
    policy_digest: str | None = None
    approvals: tuple[Approval, ...] = ()
    """The approvals of the current round."""
    round: int = 1
    """The round of approval: a resolution as not started of an attempt that used the
    consent up opens the next one (revision 0010)."""
    renewed_at: datetime | None = None
    """When the current round opened, from the second round on."""
    read_at: datetime | None = None
    """The database's clock when the store read this record (None: built, not read):
    expiry is judged by it (:func:`arvis.domain.states.consent_expired`)."""

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
    kind: JournalKind
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: EffectBoundary | None
    body_text: str
    """The canonical (RFC 8785) body, byte for byte what the chain hashes."""
    prev_hash: str
    entry_hash: str
    recorded_at: datetime

    def __post_init__(self) -> None:
        # Rows read back carry the columns' text; the entry holds the domain's enums
        # (equal to that text, so hashing and comparing are unchanged).
        if type(self.kind) is not JournalKind:
            object.__setattr__(self, "kind", JournalKind(self.kind))
        if self.boundary is not None and type(self.boundary) is not EffectBoundary:
            object.__setattr__(self, "boundary", EffectBoundary(self.boundary))

    @property
    def body(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body_text)
        return loaded

    @property
    def artifact(self) -> JournalArtifact:
        """The typed value of the body (arvis.domain.journal)."""
        return read_artifact(self.kind, self.body_text)


ChainRow = tuple[int, str, str, str, str, str, int | None, str | None, str | None, datetime, str]
"""(position, prev_hash, entry_hash, kind, causal_id, idempotency_key, attempt,
intent_id, boundary, recorded_at, body_text)"""


@dataclass(frozen=True, slots=True)
class LatestAttempt:
    """The last journaled attempt of a decision: what the retry table reads."""

    attempt: int
    boundary: EffectBoundary
    retryable: bool
    position: int
    resolved: EffectBoundary | None = None
    """What a resolution says the attempt did, when it was uncertain and resolved."""
    resolution_position: int | None = None
    plan_id: PlanId | None = None
    """The plan the attempt was decided under (its tool's definition is that plan's)."""


@dataclass(frozen=True, slots=True)
class DecisionHistory:
    """What the store knows of one decision, for Python to decide on (DESIGN §4)."""

    bound_key: IdempotencyKey | None
    """The decision the run's causal id names, or None when it names none yet."""
    latest: LatestAttempt | None
    in_flight: int | None
    """The attempt number in flight, if any."""
    confirmation: ConfirmationRecord | None
    read_at: datetime | None = None
    """The database's clock when this was read: expiry is judged by it too."""
    owner: str | None = None
    """The principal the run is bound to (None: no such run yet, or a run from before
    revision 0010 not bound yet). A run's binding never changes once made."""

    @property
    def next_attempt(self) -> int:
        last = max(self.latest.attempt if self.latest else 0, self.in_flight or 0)
        return last + 1


NEW_DECISION = DecisionHistory(bound_key=None, latest=None, in_flight=None, confirmation=None)
"""The history admission assumes first: the common case, checked by the store."""


@dataclass(frozen=True, slots=True)
class InFlightAttempt:
    """An attempt whose result was never journaled, as recovery finds it."""

    tenant_id: TenantId
    idempotency_key: IdempotencyKey
    attempt: int
    run_id: RunId
    causal_id: str
    tool: str
    plan_id: PlanId
    intent_id: IntentId
    capability_id: CapabilityId
    commitment: str
    receipt_position: int
    context: dict[str, Any]
    owner: str
    confirmation_id: ConfirmationId | None
    admitted_at: datetime
    started: bool
    """The tool durably reported that its effect started."""
    payload_digest: str
    policy: dict[str, Any] | None = None
    """The :class:`PolicyRecord` of the decision that admitted it (revision 0007 on)."""


# -- the write steps ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admission:
    """Write an authorized attempt: the capability consumed, the intent recorded."""

    intent: Intent
    commitment: str
    """``intent.commitment``, computed once."""
    payload_text: str
    """The frozen payload, kept once on the decision."""
    reserve: bool
    """Reserve the intent's APPROVED confirmation for this attempt."""
    receipt: AuditReceipt | None
    """An external sink's receipt; None lets the store assign the next position."""
    policy: PolicyRecord | None = None
    """Which policy authorized it, kept on the attempt for its settling entry."""
    charges: tuple[BudgetCharge, ...] = ()
    """Budget charges, each applied only while its window stays within the limit;
    none applied (and nothing admitted) when one does not fit."""


AdmitStatus = Literal[
    "admitted",
    "stale",
    "identity_mismatch",
    "causal_conflict",
    "receipt_reused",
    "budget_exceeded",
]


@dataclass(frozen=True, slots=True)
class AdmitAnswer:
    status: AdmitStatus
    receipt_position: int | None
    run_plan: PlanId | None
    budget: str | None = None
    """``budget_exceeded``: the first charge that did not fit."""


@dataclass(frozen=True, slots=True)
class Binding:
    """Bind the run (a new one to ``plan_id`` and to the principal the step is for) and
    its causal id (to this decision) first."""

    plan_id: PlanId | None
    tool: str
    payload_digest: str
    payload_text: str | None


@dataclass(frozen=True, slots=True)
class ConfirmationChange:
    """A confirmation's conditional transition, written with an entry: each of
    ``from_states`` → ``to_state`` must be a transition of the domain's table."""

    confirmation_id: ConfirmationId
    from_states: tuple[ConfirmationState, ...]
    to_state: ConfirmationState
    strict: bool = False
    """No confirmation in ``from_states`` makes the whole step 'stale'."""
    decided_by: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        for current in self.from_states:
            check_confirmation_transition(current, self.to_state)


@dataclass(frozen=True, slots=True)
class JournalAppend:
    """Append one entry to a run's chain, with the state changes that go with it."""

    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: EffectBoundary | None
    retryable: bool
    artifact: JournalArtifact
    recorded_at: datetime
    settle: bool = False
    """The entry settles the in-flight attempt (``idempotency_key``, ``attempt``)."""
    bind: Binding | None = None
    confirmation: ConfirmationChange | None = None
    flag: str | None = None
    """Flag the run audit-incomplete with this reason."""
    release_budgets: bool = False
    """With ``settle``: give back the budget charges of the settled attempt (its effect
    provably did not start)."""


AppendStatus = Literal[
    "appended", "existing", "conflict", "stale", "causal_conflict", "identity_mismatch"
]


@dataclass(frozen=True, slots=True)
class AppendAnswer:
    status: AppendStatus
    entry: JournalEntry | None


@dataclass(frozen=True, slots=True)
class ConsentRequest:
    confirmation: ConfirmationRecord
    plan_id: PlanId
    payload_digest: str
    payload_text: str


ConsentStatus = Literal["created", "existing", "identity_mismatch", "causal_conflict"]


@dataclass(frozen=True, slots=True)
class ConsentAnswer:
    status: ConsentStatus
    confirmation_id: ConfirmationId | None
    run_plan: PlanId | None


@dataclass(frozen=True, slots=True)
class UncertainAttempt:
    """An attempt journaled uncertain, and whether it is resolved yet."""

    entry: JournalEntry
    """The uncertain entry (never changed)."""
    resolved: EffectBoundary | None
    resolution_position: int | None
    asks: int
    payload: Any
    """The decision's frozen payload (a reconcile hook is asked with it)."""


@dataclass(frozen=True, slots=True)
class ConsentRenewal:
    """Open the next round of approval of a consent an uncertain attempt used up."""

    confirmation: ConfirmationRecord
    """The consent as Python decided on it: CONSUMED, in the round before ``round``."""
    round: int
    to_state: ConfirmationState
    """PENDING, or APPROVED when the resolver's approval meets the quorum."""
    expires_at: datetime
    approver: Decider | None
    """The resolver, when their resolution counts as an approval of the new round."""
    decided_by: str | None
    """Who approved it, when the new round is APPROVED at once."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """Append a resolution of an uncertain attempt (written by ``arvis_resolve``)."""

    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    idempotency_key: str
    attempt: int
    uncertain_position: int
    artifact: ResolutionArtifact
    resolved_by: str
    recorded_at: datetime
    renewal: ConsentRenewal | None = None
    """The consent's next round, written with the resolution (or nothing is)."""


ResolveStatus = Literal["appended", "resolved", "not_uncertain", "stale"]


@dataclass(frozen=True, slots=True)
class ResolveAnswer:
    status: ResolveStatus
    entry: JournalEntry | None


@dataclass(frozen=True, slots=True)
class ApprovalStep:
    """Record one approval and its journal entry (written by ``arvis_approve``)."""

    confirmation: ConfirmationRecord
    approver_principal: str
    approver_method: str
    approver_key_id: str | None
    approver_groups: tuple[str, ...]
    seen: int
    """The approvals Python decided on."""
    to_state: ConfirmationState
    """PENDING short of the quorum, APPROVED when this approval meets it."""
    decided_by: str | None
    artifact: ConsentArtifact
    recorded_at: datetime


ApproveStatus = Literal["appended", "stale", "duplicate", "expired"]


@dataclass(frozen=True, slots=True)
class ApproveAnswer:
    status: ApproveStatus
    entry: JournalEntry | None


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """One window of one budget, for one scope of a tenant."""

    budget: str
    scope_key: str
    window_start: datetime
    used: Decimal


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as a list of runs shows it (the operator console)."""

    run_id: RunId
    created_at: datetime
    entries: int
    last_activity: datetime | None
    """When its latest journal entry was recorded (None: nothing journaled yet)."""
    audit_incomplete: bool
    waiting: int
    """Confirmations of the run still waiting for consent (PENDING)."""
    uncertain: int
    """Uncertain attempts of the run not resolved yet."""


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

    async def runs(
        self, tenant_id: TenantId, containing: str | None, limit: int, offset: int
    ) -> tuple[list[RunSummary], int]:
        """The tenant's runs whose id contains ``containing``, newest first, one page;
        and how many there are in all."""
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

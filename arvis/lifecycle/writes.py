"""What each write step of the lifecycle's store takes and answers (DESIGN §2 "one
writer, one decider"): an admission, a journal append with its state changes, a consent
request, a resolution, an approval. Each answer carries a status, never an exception, for
what the step found (``stale``, ``conflict``, ``budget_exceeded`` ...).

The protocols that take them are :mod:`arvis.lifecycle.ports`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Literal, TypeVar

from arvis.domain.attempt import AttemptKey
from arvis.domain.authorization import PolicyRecord
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import ConfirmationId, PlanId
from arvis.domain.intent import AuditReceipt, Intent
from arvis.domain.journal import (
    ConsentArtifact,
    Decider,
    JournalArtifact,
    ResolutionArtifact,
)
from arvis.domain.states import ConfirmationState, check_confirmation_transition
from arvis.lifecycle.policy.budgets import BudgetCharge
from arvis.lifecycle.records import ConfirmationRecord, JournalEntry


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

    key: AttemptKey
    """The attempt the entry is about (``attempt`` None: the decision's, not an
    attempt's)."""
    intent_id: str | None
    boundary: EffectBoundary | None
    retryable: bool
    artifact: JournalArtifact
    recorded_at: datetime
    settle: bool = False
    """The entry settles the in-flight attempt ``key``."""
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


S = TypeVar("S", bound=str)


@dataclass(frozen=True)
class EntryAnswer(Generic[S]):
    """What a step that appends one journal entry answers: its status, and the entry
    (the one appended, or the one already there), the same for an append, a
    resolution and an approval; only the statuses each can find differ.

    Not slotted: on Python 3.11 a frozen slotted dataclass cannot be built through a
    subscripted alias such as :data:`AppendAnswer` (its ``__setattr__`` names the class
    that ``slots`` replaced)."""

    status: S
    entry: JournalEntry | None


AppendAnswer = EntryAnswer[AppendStatus]


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

    key: AttemptKey
    """The uncertain attempt resolved."""
    uncertain_position: int
    artifact: ResolutionArtifact
    resolved_by: str
    recorded_at: datetime
    renewal: ConsentRenewal | None = None
    """The consent's next round, written with the resolution (or nothing is)."""


ResolveStatus = Literal["appended", "resolved", "not_uncertain", "stale"]


ResolveAnswer = EntryAnswer[ResolveStatus]


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


ApproveAnswer = EntryAnswer[ApproveStatus]

"""What admission asks authorization, and the steps authorization answers (DESIGN §1, §4).

:meth:`arvis.lifecycle.authorization.ToolAuthorizationService.decide` takes an
:class:`AdmissionRequest` and the decision's history and answers one
:data:`AuthorizationStep`; the admission loop has the store write it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arvis.domain.authorization import (
    ApprovalTerms,
    AuthorizationSnapshot,
    ConsentPolicy,
    DenialSnapshot,
)
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import ToolDefinition
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.identity import Identity
from arvis.domain.ids import CausalId, IdempotencyKey, InstanceId, PlanId, RunId
from arvis.domain.payload import FrozenEffectPayload
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.policy.budgets import BudgetCharge
from arvis.lifecycle.records import ConfirmationRecord
from arvis.tools.plans import ToolPlan


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    identity: Identity
    run_id: RunId
    causal_id: CausalId
    tool: str
    payload: FrozenEffectPayload
    plan: ToolPlan | None
    """None when the run's plan could not be leased."""
    plan_id: PlanId
    instance_id: InstanceId
    idempotency_key: IdempotencyKey = field(init=False)

    def __post_init__(self) -> None:
        key = derive_idempotency_key(
            self.identity.tenant_id, self.run_id, self.causal_id, self.tool, self.payload.digest
        )
        object.__setattr__(self, "idempotency_key", key)


@dataclass(frozen=True, slots=True)
class Proceed:
    """Authorized: admit attempt ``snapshot.attempt`` under a fresh capability."""

    snapshot: AuthorizationSnapshot
    confirmation: ConfirmationRecord | None
    """The consent the attempt acts under (APPROVED: reserve it; CONSUMED: re-check)."""
    charges: tuple[BudgetCharge, ...] = ()
    """What the attempt adds to each budget it is charged to, if each stays within its
    limit (the store checks that, in the admitting statement)."""

    @property
    def reserve(self) -> bool:
        return (
            self.confirmation is not None and self.confirmation.state is ConfirmationState.APPROVED
        )


@dataclass(frozen=True, slots=True)
class Refuse:
    denial: DenialSnapshot
    attempt: int | None
    """The attempt number this refusal takes, or None when it is not an attempt."""
    expire: ConfirmationRecord | None = None
    """A waiting confirmation found unusable at the moment of use (expired, or stale):
    the step is its expiry, journaled as the consent's end like any other expiry
    (:func:`arvis.lifecycle.entries.expiry`), which answers the syscall refused."""


@dataclass(frozen=True, slots=True)
class Deduplicated:
    position: int
    """The journal position of the recorded result."""
    resolution: int | None = None
    """The position of the resolution that says an uncertain attempt completed."""


@dataclass(frozen=True, slots=True)
class InFlight:
    pass


@dataclass(frozen=True, slots=True)
class AnotherPrincipal:
    """The run is bound to another principal: nothing is decided, nothing written, and
    nothing of the run is answered (DESIGN §10 "A decision belongs to its principal")."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """The tool's definition in the plan the decision's latest attempt was decided
    under, when that is not the request's plan (None: the tool was not in it)."""

    definition: ToolDefinition | None


@dataclass(frozen=True, slots=True)
class AwaitConsent:
    context: AuthorizedEffectContext
    existing: ConfirmationRecord | None
    terms: ApprovalTerms | None = None
    """Who may approve, how many, for how long (None: any approver, one, the default)."""
    definition_fingerprint: str | None = None
    policy_digest: str | None = None
    """What the approval will be for: re-checked when the approved call is used."""
    policy: ConsentPolicy | None = None
    """Which policy asked, and why: what the approver is shown (revision 0018)."""


AuthorizationStep = Proceed | Refuse | Deduplicated | InFlight | AwaitConsent | AnotherPrincipal
"""The authorization outcome of DESIGN §1 (``Proceed`` carries the sealed snapshot,
``Refuse`` the typed denial), with the retry table's answers that decide nothing anew."""

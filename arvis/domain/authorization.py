"""Authorization outcomes (DESIGN §1): an immutable snapshot, or a typed denial."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.ids import CapabilityId, ConfirmationId, IdempotencyKey


class DenialReason(StrEnum):
    """Stable reason codes of a refusal; clients may branch on them."""

    UNKNOWN_TOOL = "unknown_tool"
    PAYLOAD_INVALID = "payload_invalid"
    POLICY_DENIED = "policy_denied"
    CAPABILITY_DENIED = "capability_denied"
    EGRESS_DENIED = "egress_denied"
    CONFIRMATION_DENIED = "confirmation_denied"
    CONFIRMATION_EXPIRED = "confirmation_expired"
    IDENTITY_MISMATCH = "identity_mismatch"
    RETRY_NOT_ADVISED = "retry_not_advised"
    RETRY_PROHIBITED_UNCERTAIN = "retry_prohibited_uncertain"
    CAUSAL_ID_CONFLICT = "causal_id_conflict"
    PLAN_UNAVAILABLE = "plan_unavailable"
    APPROVAL_STALE = "approval_stale"
    """The tool definition or the policy changed since the consent was asked."""
    BUDGET_EXCEEDED = "budget_exceeded"
    PLAN_RETIRED = "plan_retired"
    """The tool's definition changed (or it left the plan) since an earlier attempt of
    this decision that may have taken effect: it is not run again under another one."""

    @property
    def is_attempt(self) -> bool:
        """Whether this refusal is an attempt of the action.

        Refusals about the decision itself (policy, schema, consent) are attempts:
        a later retry is admitted afresh. Refusals that apply the retry table, that
        name another decision, that turn away another principal's post of a
        consented decision, or that keep an attempt which may have taken effect from
        running again under a changed definition are not: they must not reset what
        the table saw (a stranger's refused post after an uncertain outcome must never
        make the requester's next post look retry-free).
        """
        return self not in _NOT_ATTEMPTS


_NOT_ATTEMPTS = frozenset(
    {
        DenialReason.RETRY_NOT_ADVISED,
        DenialReason.RETRY_PROHIBITED_UNCERTAIN,
        DenialReason.CAUSAL_ID_CONFLICT,
        DenialReason.IDENTITY_MISMATCH,
        DenialReason.PLAN_RETIRED,
    }
)


GROUP_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""An approver group's name (a key attribute, ``arvis keys create --group``)."""


class ApprovalTerms(BaseModel):
    """Who may consent to one tool's calls, how many must, and for how long (issue 16).

    Frozen onto the confirmation when consent is asked: a later policy change
    does not loosen or tighten a request already waiting.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    approvers: tuple[str, ...] = ()
    """Approver groups; an approval needs a key in one of them. Empty: any approver."""
    quorum: int = Field(default=1, ge=1, le=20)
    """Distinct approvers needed; a deny by any of them denies."""
    ttl_s: float | None = Field(default=None, gt=0, le=365 * 24 * 3600)
    """The confirmation expires this long after it was asked; None: the deployment's."""


class PolicyDecision(BaseModel):
    """What a ToolPolicy said, and which policy said it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: bool
    reason: DenialReason | None = None
    detail: str = ""
    """Why: a refusal's explanation, or, for an allow with consent, why consent is asked
    (shown to the approver beside the deciding policies)."""
    consent_required: bool = False
    approval: ApprovalTerms | None = None
    """The terms of the consent, when one is required and the policy names them."""
    policy_version: str
    policy_digest: str
    """The fingerprint of the policy in force (for Cedar: the policy set's)."""
    policy_engine: str = "rules"
    policy_ids: tuple[str, ...] = ()
    """The rules or policies that decided: Cedar's ``@id`` annotations (else its policy
    ids), a RulePolicy rule's name, or a built-in gate's."""


class PolicyRecord(BaseModel):
    """Which policy decided an attempt, as its journal entry keeps it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    engine: str
    version: str
    digest: str
    policy_ids: tuple[str, ...] = ()


class ConsentPolicy(PolicyRecord):
    """Which policy asked for a consent, and why: kept with the confirmation (revision
    0018) so an approver sees the rule that demanded it, not only a digest."""

    reason: str | None = None


class DenialSnapshot(BaseModel):
    """Why a decision was refused. Immutable; journaled with the refusal."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: DenialReason
    detail: str
    tool: str
    idempotency_key: IdempotencyKey
    policy_version: str | None = None
    policy_digest: str | None = None
    policy_engine: str | None = None
    policy_ids: tuple[str, ...] = ()
    """The policies (or rules, or gates) that refused, when a policy did."""
    budget: str | None = None
    """``budget_exceeded``: the budget that is spent."""
    resets_at: datetime | None = None
    """``budget_exceeded``: when the budget's window ends."""


class AuthorizationSnapshot(BaseModel):
    """Everything that was decided for one attempt, sealed before anything is minted."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context: AuthorizedEffectContext
    tool: str
    definition_fingerprint: str
    payload_digest: str
    idempotency_key: IdempotencyKey
    attempt: int
    policy_version: str
    policy_digest: str
    policy_engine: str = "rules"
    policy_ids: tuple[str, ...] = ()
    confirmation_id: ConfirmationId | None = None


POLICY_FIELDS = ("policy_version", "policy_digest", "policy_engine", "policy_ids")
"""Which policy decided: the same four fields on a decision, the snapshot sealed from
it and a denial, each carried whole from the one before."""


def policy_fields(decided: PolicyDecision | AuthorizationSnapshot) -> dict[str, Any]:
    """``decided``'s :data:`POLICY_FIELDS`, to build the next value with."""
    return {name: getattr(decided, name) for name in POLICY_FIELDS}


def policy_record(decided: PolicyDecision | AuthorizationSnapshot) -> PolicyRecord:
    """Which policy decided, as an attempt keeps it for its settling entry."""
    return PolicyRecord.model_construct(
        engine=decided.policy_engine,
        version=decided.policy_version,
        digest=decided.policy_digest,
        policy_ids=decided.policy_ids,
    )


def consent_policy(decided: PolicyDecision) -> ConsentPolicy:
    """Which policy asked for the consent ``decided`` requires, and its reason."""
    return ConsentPolicy(**policy_record(decided).model_dump(), reason=decided.detail or None)


class Authorized(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["authorized"] = "authorized"
    snapshot: AuthorizationSnapshot
    capability_id: CapabilityId


class Denied(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["denied"] = "denied"
    denial: DenialSnapshot

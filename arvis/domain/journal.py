"""What a journal entry records (DESIGN §1 ``ExecutionArtifact``): one typed value per kind.

Every body the journal holds is built here and read back here. The chain hashes
its RFC 8785 text (:func:`artifact_text`), so a body is written once, in canonical
form, and never rebuilt from a dict somewhere else.

Kinds: ``execution`` (a dispatched attempt and what became of it), ``refusal``
(``PRE_EFFECT_REFUSAL``: nothing minted, nothing run), ``recovery`` (an attempt
an interrupted process left, settled by a sweeper), ``confirmation`` (an
approver's decision on a consent, or the consent's expiry), ``resolution`` (an
operator's or a reconcile hook's account of what an uncertain attempt did).
Entries written before a schema revision lack the fields it added (marked as
such); they read as ``None``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    field_serializer,
)

from arvis.domain.authorization import DenialReason, DenialSnapshot, PolicyRecord
from arvis.domain.boundary import EffectBoundary
from arvis.domain.canonical import canonical_bytes
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.identity import Actor, acting_for, named
from arvis.domain.ids import CapabilityId, ConfirmationId, PlanId
from arvis.domain.states import CapabilityState, ConfirmationState


class JournalKind(StrEnum):
    """The ``kind`` column of an entry: stable names, written and read as they are
    here, whatever the artifact classes are called."""

    EXECUTION = "execution"
    REFUSAL = "refusal"
    RECOVERY = "recovery"
    CONFIRMATION = "confirmation"
    RESOLUTION = "resolution"


EXPIRED_REASON = "expired"
"""The reason journaled with a consent whose time ran out."""
STALE_REASON = "approval_stale"
"""The reason journaled with a consent ended because it went stale: approved for
another definition or policy than the one in force at the moment of use."""


def _absent(value: object) -> bool:
    # Fields added after a kind's first version are left out of its text when unset,
    # so a body of the earlier shape keeps its exact bytes (the chain hashes them).
    return value is None


class _Body(BaseModel):
    # Bodies are read back from entries of every age: unknown fields are kept out,
    # never an error (the chain, not the model, is what guards their bytes).
    model_config = ConfigDict(frozen=True, extra="ignore")


class Capability(_Body):
    """The single-use capability of an attempt, with each transition's time.

    Minted, activated by its receipt and consumed in the one admission
    transaction: one row version, three equal times (DESIGN §2).
    """

    id: CapabilityId
    state: CapabilityState = CapabilityState.CONSUMED
    minted_at: datetime
    activated_at: datetime
    consumed_at: datetime

    @field_serializer("minted_at", "activated_at", "consumed_at")
    def _in_utc(self, moment: datetime) -> datetime:
        # One instant, one text: a time read back in a session's TimeZone hashes
        # as the same body as the time the process took.
        return moment.astimezone(UTC)


class Receipt(_Body):
    """The audit receipt as the journal keeps it."""

    position: int
    intent_commitment: str
    store_fingerprint: str


class Problem(_Body):
    """A tool's problem result, or a classified failure: model-visible, never a trace."""

    code: str
    detail: str
    effect_started: bool | None = True
    retryable: bool = False


class _Attempted(_Body):
    """What the entry that settles an attempt says of it, whoever settles it (its
    owner: an execution; a sweeper: a recovery)."""

    payload: JsonValue = None
    """The frozen payload (revision 0005 on)."""
    context: AuthorizedEffectContext | None = None
    """Who asked, how they authenticated, where it ran (revision 0005 on)."""
    capability: Capability | None = None
    confirmation_id: ConfirmationId | None = None
    receipt: Receipt | None = None
    result: JsonValue = None


class ExecutionArtifact(_Attempted):
    """A dispatched attempt and its outcome (its boundary is the entry's column)."""

    kind: ClassVar[JournalKind] = JournalKind.EXECUTION

    tool: str
    plan_id: PlanId
    payload_digest: str
    problem: Problem | None = None
    retryable: bool = False
    policy: PolicyRecord | None = None
    """The policy that authorized the attempt and the ids that decided (revision 0007 on)."""


class RefusalArtifact(_Body):
    """A decision refused at admission, with its immutable denial snapshot."""

    kind: ClassVar[JournalKind] = JournalKind.REFUSAL

    tool: str
    plan_id: PlanId | str
    payload_digest: str
    payload: JsonValue = None
    principal_id: str
    reason: DenialReason
    detail: str
    denial: DenialSnapshot
    actor: Actor | None = Field(default=None, exclude_if=_absent)
    """The agent that made the refused call for the principal, when one did (issue 26):
    a refusal says who asked as an execution's sealed context does."""


class RecoveryArtifact(_Attempted):
    """An attempt its process never journaled, settled by recovery as uncertain."""

    kind: ClassVar[JournalKind] = JournalKind.RECOVERY

    tool: str
    plan_id: PlanId | None = None
    payload_digest: str | None = None
    problem: Problem
    recovered_from: str
    retryable: bool = False
    policy: PolicyRecord | None = None
    """The policy that authorized the attempt (revision 0007 on)."""


class Decider(_Body):
    principal_id: str
    auth_method: str
    key_id: str | None = None
    groups: list[str] | None = Field(default=None, exclude_if=_absent)
    """The approver groups the key held when it decided (revision 0006 on)."""
    actor: str | None = Field(default=None, exclude_if=_absent)
    """The agent that decided for the principal (an agent withdrawing what it asked for
    a person), when one did (issue 26)."""


class ConsentArtifact(_Body):
    """An approver's decision on a confirmation: who, how authenticated, and why."""

    kind: ClassVar[JournalKind] = JournalKind.CONFIRMATION

    confirmation_id: ConfirmationId
    decision: ConfirmationState
    tool: str
    requested_by: str
    decided_by: Decider
    requested_actor: str | None = Field(default=None, exclude_if=_absent)
    """The agent that asked for consent for ``requested_by``, when one did (issue 26)."""
    reason: str | None = None
    state: ConfirmationState | None = Field(default=None, exclude_if=_absent)
    """The confirmation's state after this decision (revision 0006 on): an approval
    short of its quorum leaves it PENDING."""
    approvals: int | None = Field(default=None, exclude_if=_absent)
    """Distinct approvals recorded, this one included (revision 0006 on)."""
    quorum: int | None = Field(default=None, exclude_if=_absent)
    round: int | None = Field(default=None, exclude_if=_absent)
    """The round of approval this decision belongs to, from the second on (revision
    0010): a resolution as not started re-opens a consent its attempt used up."""


class ResolvedEntry(_Body):
    """The uncertain entry a resolution settles: it is never changed."""

    position: int
    entry_hash: str
    boundary: EffectBoundary


class ConsentRound(_Body):
    """What a resolution as not started did to the consent its attempt ran under.

    The resolved attempt used that consent up; another attempt needs what the consent
    needed (DESIGN §10), so the consent opens a new round of approval, under the terms
    frozen when it was asked. The resolver's word counts as one approval of the round
    when the resolver could have approved (approver role, one of the groups, not the
    requester unless self-approval is allowed); a reconcile hook's never does.
    """

    confirmation_id: ConfirmationId
    round: int
    state: ConfirmationState
    """PENDING, or APPROVED when the resolver's approval alone meets the quorum."""
    approvals: int
    quorum: int


class ResolutionArtifact(_Body):
    """What an uncertain attempt turned out to have done, said by a person or a hook.

    ``boundary`` is EFFECT_COMPLETED, EFFECT_FAILED or EFFECT_NOT_STARTED; the
    retry table reads it in place of the uncertain boundary it resolves.
    """

    kind: ClassVar[JournalKind] = JournalKind.RESOLUTION

    tool: str
    attempt: int
    resolves: ResolvedEntry
    boundary: EffectBoundary
    resolved_by: Decider
    """A principal (from its authentication), or ``reconciler:<tool>``."""
    evidence: str
    requested_by: str
    """The principal whose call it was (four eyes)."""
    requested_actor: str | None = Field(default=None, exclude_if=_absent)
    """The agent that made the call for ``requested_by``, when one did (issue 26)."""
    consent: ConsentRound | None = Field(default=None, exclude_if=_absent)
    """The consent's new round, when the attempt ran under consent and is resolved as
    not started (revision 0010 on)."""


JournalArtifact = (
    ExecutionArtifact | RefusalArtifact | RecoveryArtifact | ConsentArtifact | ResolutionArtifact
)

_MODELS: dict[str, type[_Body]] = {model.kind: model for model in get_args(JournalArtifact)}
_PLAIN: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def caller(artifact: JournalArtifact) -> str | None:
    """Who made the call or the decision an entry records, as a person reads it (the
    console's timeline, ``arvis journal``): the principal and its key, ``<agent> for
    <person>`` when an agent acted for a person (issue 26); for a consent, who decided
    and who asked; for a resolution, who resolved. None: an entry from before the sealed
    context was journaled (revision 0005)."""
    if isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
        context = artifact.context
        if context is None:
            return None
        agent = None if context.actor is None else context.actor.describe()
        return acting_for(named(context.principal_id, context.key_id), agent)
    if isinstance(artifact, RefusalArtifact):
        agent = None if artifact.actor is None else artifact.actor.describe()
        return acting_for(artifact.principal_id, agent)
    if isinstance(artifact, ConsentArtifact):
        decider = artifact.decided_by
        decided = acting_for(named(decider.principal_id, decider.key_id), decider.actor)
        return f"{decided}, asked by {acting_for(artifact.requested_by, artifact.requested_actor)}"
    resolver = artifact.resolved_by
    return named(resolver.principal_id, resolver.key_id)


def artifact_text(artifact: JournalArtifact) -> str:
    """The canonical (RFC 8785) body text the chain hashes."""
    return canonical_bytes(artifact.model_dump(mode="json")).decode()


# The sealed context and the denial snapshot refuse unknown fields when ARVIS builds
# them; read back from a body a later version wrote, unknown fields are dropped.
_NESTED_SEALED: dict[str, frozenset[str]] = {
    "context": frozenset(AuthorizedEffectContext.model_fields),
    "denial": frozenset(DenialSnapshot.model_fields),
}


def read_artifact(kind: str, body_text: str) -> JournalArtifact:
    """The typed value of a stored body."""
    model = _MODELS[kind]
    try:
        value = model.model_validate_json(body_text)
    except ValidationError:
        body = body_dict(body_text)
        for name, known in _NESTED_SEALED.items():
            nested = body.get(name)
            if isinstance(nested, dict):
                body[name] = {k: v for k, v in nested.items() if k in known}
        value = model.model_validate(body)
    assert isinstance(value, JournalArtifact)
    return value


def body_dict(body_text: str) -> dict[str, Any]:
    """A stored body as plain JSON, for an auditor's view of the entry."""
    return _PLAIN.validate_json(body_text)

"""What a journal entry records (DESIGN §1 ``ExecutionArtifact``): one typed value per kind.

Every body the journal holds is built here and read back here. The chain hashes
its RFC 8785 text (:func:`artifact_text`), so a body is written once, in canonical
form, and never rebuilt from a dict somewhere else.

Kinds: ``execution`` (a dispatched attempt and what became of it), ``refusal``
(``PRE_EFFECT_REFUSAL``: nothing minted, nothing run), ``recovery`` (an attempt
an interrupted process left, settled by a sweeper), ``confirmation`` (an
approver's decision on a consent). Entries written before schema revision 0005
lack the fields marked as such; they read as ``None``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter

from arvis.domain.authorization import DenialReason, DenialSnapshot
from arvis.domain.canonical import canonical_bytes
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.ids import CapabilityId, ConfirmationId, PlanId
from arvis.domain.states import CapabilityState, ConfirmationState

JournalKind = Literal["execution", "refusal", "recovery", "confirmation"]


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


class ExecutionArtifact(_Body):
    """A dispatched attempt and its outcome (its boundary is the entry's column)."""

    tool: str
    plan_id: PlanId
    payload_digest: str
    payload: JsonValue = None
    """The frozen payload (revision 0005 on)."""
    context: AuthorizedEffectContext | None = None
    """Who asked, how they authenticated, where it ran (revision 0005 on)."""
    capability: Capability | None = None
    confirmation_id: ConfirmationId | None = None
    receipt: Receipt | None = None
    result: JsonValue = None
    problem: Problem | None = None
    retryable: bool = False


class RefusalArtifact(_Body):
    """A decision refused at admission, with its immutable denial snapshot."""

    tool: str
    plan_id: PlanId | str
    payload_digest: str
    payload: JsonValue = None
    principal_id: str
    reason: DenialReason
    detail: str
    denial: DenialSnapshot


class RecoveryArtifact(_Body):
    """An attempt its process never journaled, settled by recovery as uncertain."""

    tool: str
    plan_id: PlanId | None = None
    payload_digest: str | None = None
    payload: JsonValue = None
    context: AuthorizedEffectContext | None = None
    capability: Capability | None = None
    confirmation_id: ConfirmationId | None = None
    receipt: Receipt | None = None
    result: JsonValue = None
    problem: Problem
    recovered_from: str
    retryable: bool = False


class Decider(_Body):
    principal_id: str
    auth_method: str
    key_id: str | None = None


class ConsentArtifact(_Body):
    """An approver's decision on a confirmation: who, how authenticated, and why."""

    confirmation_id: ConfirmationId
    decision: ConfirmationState
    tool: str
    requested_by: str
    decided_by: Decider
    reason: str | None = None


JournalArtifact = ExecutionArtifact | RefusalArtifact | RecoveryArtifact | ConsentArtifact

_MODELS: dict[str, type[_Body]] = {
    "execution": ExecutionArtifact,
    "refusal": RefusalArtifact,
    "recovery": RecoveryArtifact,
    "confirmation": ConsentArtifact,
}
_PLAIN: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def artifact_text(artifact: JournalArtifact) -> str:
    """The canonical (RFC 8785) body text the chain hashes."""
    return canonical_bytes(artifact.model_dump(mode="json")).decode()


def read_artifact(kind: str, body_text: str) -> JournalArtifact:
    """The typed value of a stored body."""
    model = _MODELS[kind]
    value = model.model_validate_json(body_text)
    assert isinstance(value, JournalArtifact)
    return value


def body_dict(body_text: str) -> dict[str, Any]:
    """A stored body as plain JSON, for an auditor's view of the entry."""
    return _PLAIN.validate_json(body_text)

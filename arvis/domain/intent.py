"""Intents, audit receipts and the journal's hash chain (DESIGN §1, §5)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.attempt import AttemptKey
from arvis.domain.canonical import canonical_flat, sha256_hex
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.ids import (
    CapabilityId,
    ConfirmationId,
    IdempotencyKey,
    IntentId,
    PlanId,
)
from arvis.domain.journal import Receipt
from arvis.domain.payload import FrozenEffectPayload

GENESIS_HASH = "0" * 64
"""``prev_hash`` of a run's first journal entry."""


class Intent(BaseModel):
    """The exact invocation about to run, committed before dispatch."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    intent_id: IntentId
    context: AuthorizedEffectContext
    tool: str
    plan_id: PlanId
    payload: FrozenEffectPayload
    idempotency_key: IdempotencyKey
    attempt: int = Field(ge=1)
    capability_id: CapabilityId
    confirmation_id: ConfirmationId | None = None
    admitted_at: datetime
    """When admission decided it: the time of its capability's three transitions."""

    @property
    def key(self) -> AttemptKey:
        """The attempt this intent is."""
        context = self.context
        return AttemptKey(
            context.tenant_id,
            context.run_id,
            context.causal_id,
            self.idempotency_key,
            self.attempt,
        )

    @property
    def commitment(self) -> str:
        """SHA-256 over the canonical intent: what the receipt must name."""
        return intent_commitment(
            intent_id=self.intent_id,
            tenant_id=self.context.tenant_id,
            run_id=self.context.run_id,
            causal_id=self.context.causal_id,
            principal_id=self.context.principal_id,
            tool=self.tool,
            plan_id=self.plan_id,
            payload_digest=self.payload.digest,
            idempotency_key=self.idempotency_key,
            attempt=self.attempt,
            capability_id=self.capability_id,
        )


def intent_commitment(
    *,
    intent_id: str,
    tenant_id: str,
    run_id: str,
    causal_id: str,
    principal_id: str,
    tool: str,
    plan_id: str,
    payload_digest: str,
    idempotency_key: str,
    attempt: int,
    capability_id: str,
) -> str:
    """An intent's commitment from its fields: what admission computed, and what a
    verifier recomputes from the entry that settled it (issue 23)."""
    return sha256_hex(
        canonical_flat(
            {
                "intent_id": intent_id,
                "tenant_id": tenant_id,
                "run_id": run_id,
                "causal_id": causal_id,
                "principal_id": principal_id,
                "tool": tool,
                "plan_id": plan_id,
                "payload_digest": payload_digest,
                "idempotency_key": idempotency_key,
                "attempt": attempt,
                "capability_id": capability_id,
            }
        )
    )


class AuditReceipt(Receipt):
    """What a qualified audit sink answers for an intent it durably recorded: the
    journal's :class:`Receipt` (what an entry keeps of it), and the run and decision
    the sink says it recorded the intent for (checked before the tool runs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    causal_id: str

    def journaled(self) -> Receipt:
        """The receipt as the journal keeps it."""
        return Receipt.model_construct(
            position=self.position,
            intent_commitment=self.intent_commitment,
            store_fingerprint=self.store_fingerprint,
        )


def as_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("journal timestamps must be timezone-aware")
    return moment.astimezone(UTC)

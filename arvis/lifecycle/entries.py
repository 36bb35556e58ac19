"""Journal facts built once: the settling entry of an attempt, and a consent's end.

The same fact is written by more than one step — an attempt is settled by its owner
(:mod:`arvis.lifecycle.settlement`) or by a sweeper (:mod:`arvis.lifecycle.recovery`);
a consent ends by an approver's deny, by the expiry sweep, or found lapsed or stale at
the moment of use (admission) — so each is built here, in one shape, with the state
changes that go with it (checked against the tables of :mod:`arvis.domain.states`).
"""

from __future__ import annotations

from datetime import datetime

from arvis.domain.attempt import AttemptKey
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import CapabilityId, ConfirmationId
from arvis.domain.journal import (
    EXPIRED_REASON,
    Capability,
    ConsentArtifact,
    Decider,
    ExecutionArtifact,
    Receipt,
    RecoveryArtifact,
)
from arvis.domain.states import (
    CONSUMED_CAPABILITY,
    WAITING,
    ConfirmationState,
    settled_confirmation,
)
from arvis.lifecycle.records import ConfirmationRecord
from arvis.lifecycle.writes import ConfirmationChange, JournalAppend

EXPIRY = Decider(principal_id="arvis:expiry", auth_method="system")
"""Who the journal says ended a consent whose time ran out (or that went stale at the
moment of use): the database's clock and the rules, not a person."""


def consumed_capability(capability_id: CapabilityId, admitted_at: datetime) -> Capability:
    """An admitted attempt's capability: minted, activated and consumed in the admitting
    statement, so its three transitions share the admission's time (DESIGN §2)."""
    return Capability.model_construct(
        id=capability_id,
        state=CONSUMED_CAPABILITY,
        minted_at=admitted_at,
        activated_at=admitted_at,
        consumed_at=admitted_at,
    )


def journal_receipt(position: int, commitment: str, store_fingerprint: str) -> Receipt:
    return Receipt.model_construct(
        position=position, intent_commitment=commitment, store_fingerprint=store_fingerprint
    )


def settle_append(
    *,
    key: AttemptKey,
    intent_id: str,
    confirmation_id: ConfirmationId | None,
    boundary: EffectBoundary,
    artifact: ExecutionArtifact | RecoveryArtifact,
    recorded_at: datetime,
    flag: str | None,
) -> JournalAppend:
    """The entry that settles an attempt in flight: its row deleted, its consent
    (RESERVED for it) released or consumed as its boundary says, and — when nothing
    started — its budget charges given back, all in the one statement."""
    return JournalAppend(
        key=key,
        intent_id=intent_id,
        boundary=boundary,
        retryable=artifact.retryable,
        artifact=artifact,
        recorded_at=recorded_at,
        settle=True,
        confirmation=(
            None
            if confirmation_id is None
            else ConfirmationChange(
                confirmation_id=confirmation_id,
                from_states=(ConfirmationState.RESERVED,),
                to_state=settled_confirmation(boundary),
            )
        ),
        flag=flag,
        release_budgets=boundary.retry_is_free,
    )


def consent_end(
    current: ConfirmationRecord,
    decider: Decider,
    to: ConfirmationState,
    reason: str | None,
    recorded_at: datetime,
    *,
    decided_by: str | None = None,
) -> JournalAppend:
    """A decision that ends a waiting consent (denied, expired): the confirmation entry
    carries PRE_EFFECT_REFUSAL, so the decision reads as refused in the journal and in
    replay, and an auditor can show it never ran. Strict: a consent no longer waiting
    makes the step 'stale'."""
    return JournalAppend(
        key=current.key,
        intent_id=None,
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        retryable=False,
        artifact=ConsentArtifact(
            confirmation_id=current.confirmation_id,
            decision=to,
            tool=current.tool,
            requested_by=current.requested_by,
            requested_actor=current.requested_actor,
            decided_by=decider,
            reason=reason,
            state=to,
            approvals=len(current.approvals),
            quorum=current.quorum,
        ),
        recorded_at=recorded_at,
        confirmation=ConfirmationChange(
            confirmation_id=current.confirmation_id,
            from_states=WAITING,
            to_state=to,
            strict=True,
            decided_by=decided_by,
            reason=reason,
        ),
    )


def expiry(
    current: ConfirmationRecord, recorded_at: datetime, reason: str = EXPIRED_REASON
) -> JournalAppend:
    """The one journal shape of a consent's expiry, wherever it is found: by the sweep,
    by an approver's read, or at the moment of use (``reason`` says why: its time ran
    out, or it went stale)."""
    return consent_end(current, EXPIRY, ConfirmationState.EXPIRED, reason, recorded_at)

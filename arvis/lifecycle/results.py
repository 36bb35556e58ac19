"""What a syscall answers, and how journal entries turn back into answers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from arvis.domain import wire
from arvis.domain.authorization import DenialReason
from arvis.domain.boundary import EffectBoundary
from arvis.domain.journal import (
    STALE_REASON,
    ConsentArtifact,
    ExecutionArtifact,
    JournalArtifact,
    RecoveryArtifact,
    RefusalArtifact,
    ResolutionArtifact,
)
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.records import JournalEntry

Outcome = wire.Outcome


class ConfirmationRef(wire.ConfirmationRef):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResolutionRef(BaseModel):
    """A resolution of the uncertain attempt this result records (issue 16)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    position: int
    """The resolution's journal position (after the entry it resolves)."""
    boundary: EffectBoundary
    """What the attempt did, as resolved: completed, failed or not started."""
    resolved_by: str
    """A principal (from its key), or ``reconciler:<tool>``."""
    evidence: str
    recorded_at: str


class SyscallResult(wire.SyscallAnswer):
    """The answer to every syscall that reached governance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    confirmation: ConfirmationRef | None = None
    resolution: ResolutionRef | None = None
    """Set when this result was uncertain and has been resolved (issue 16)."""


def resolution_ref(entry: JournalEntry) -> ResolutionRef:
    """The reference a result carries to a resolution entry."""
    artifact = entry.artifact
    assert isinstance(artifact, ResolutionArtifact)
    return ResolutionRef(
        position=entry.position,
        boundary=artifact.boundary,
        resolved_by=artifact.resolved_by.principal_id,
        evidence=artifact.evidence,
        recorded_at=entry.recorded_at.isoformat(),
    )


def result_from_entry(
    entry: JournalEntry,
    *,
    outcome: Outcome | None = None,
    audit_incomplete: bool = False,
    artifact: JournalArtifact | None = None,
    resolution: JournalEntry | None = None,
) -> SyscallResult:
    """Rebuild the answer that an entry recorded, without running anything.

    ``artifact`` is the entry's typed body when the caller holds it already (it
    just wrote it); otherwise it is read from the entry.
    """
    artifact = entry.artifact if artifact is None else artifact
    recorded: Outcome = "refused" if isinstance(artifact, RefusalArtifact) else "executed"
    common: dict[str, Any] = {
        "outcome": outcome or recorded,
        "boundary": None if entry.boundary is None else EffectBoundary(entry.boundary),
        "idempotency_key": entry.idempotency_key,
        "attempt": entry.attempt,
        "run_id": entry.run_id,
        "causal_id": entry.causal_id,
        "journal_position": entry.position,
        "audit_incomplete": audit_incomplete,
        "resolution": None if resolution is None else resolution_ref(resolution),
    }
    # Every field comes from a typed artifact: nothing to validate again.
    if isinstance(artifact, RefusalArtifact):
        return SyscallResult.model_construct(
            **common, reason=artifact.reason.value, detail=artifact.detail
        )
    if isinstance(artifact, ConsentArtifact) and entry.boundary is not None:
        # A denied or expired consent: the decision was refused and never ran.
        reason = _consent_refusal(artifact).value
        return SyscallResult.model_construct(
            **{**common, "outcome": outcome or "refused", "attempt": None},
            reason=reason,
            detail=artifact.reason or f"the confirmation was {artifact.decision.lower()}",
        )
    if isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
        return SyscallResult.model_construct(
            **common,
            result=artifact.result,
            problem=None if artifact.problem is None else artifact.problem.model_dump(),
            receipt=artifact.receipt,
        )
    raise ValueError(f"a {entry.kind} entry records no syscall result")


def _consent_refusal(artifact: ConsentArtifact) -> DenialReason:
    """The refusal a consent's end answers: denied, gone stale, or expired."""
    if artifact.decision is ConfirmationState.DENIED:
        return DenialReason.CONFIRMATION_DENIED
    if artifact.reason == STALE_REASON:
        return DenialReason.APPROVAL_STALE
    return DenialReason.CONFIRMATION_EXPIRED

"""What a syscall answers, and how journal entries turn back into answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from arvis.domain.boundary import EffectBoundary
from arvis.domain.decisions import ActionDecision
from arvis.domain.journal import ExecutionArtifact, RecoveryArtifact, RefusalArtifact
from arvis.lifecycle.ports import JournalEntry

# Run, causal and confirmation ids: 1 to 128 of [A-Za-z0-9._:-], but not "." or "..".
# Those two are dot segments: a client normalises them out of a URL path, so a run
# named ".." would be reachable only percent-encoded. The three alternatives say
# "starts with a non-dot", "one dot, then a non-dot", "two dots, then anything",
# because pydantic's regex engine has no lookahead.
ID_PATTERN = (
    r"^(?:[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}"
    r"|\.[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,126}"
    r"|\.\.[A-Za-z0-9._:-]{1,126})$"
)

Outcome = Literal["executed", "deduplicated", "refused", "confirmation_required"]


class Syscall(BaseModel):
    """A request from the cognitive pipeline. ``tool.execute`` is the only one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal["tool.execute"]
    run_id: str = Field(pattern=ID_PATTERN)
    causal_id: str = Field(pattern=ID_PATTERN)
    """Names one decision of the run, for ever; retries reuse it."""
    decision: ActionDecision


class Receipt(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    position: int
    intent_commitment: str
    store_fingerprint: str


class ConfirmationRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    state: str


class SyscallResult(BaseModel):
    """The answer to every syscall that reached governance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Outcome
    boundary: EffectBoundary | None
    result: JsonValue = None
    """The tool's JSON result, when it completed without a problem."""
    problem: dict[str, Any] | None = None
    """A tool problem result or a classified failure: ``code``, ``detail`` and more."""
    reason: str | None = None
    """The denial code when refused."""
    detail: str | None = None
    idempotency_key: str
    attempt: int | None = None
    run_id: str
    causal_id: str
    receipt: Receipt | None = None
    journal_position: int | None = None
    confirmation: ConfirmationRef | None = None
    audit_incomplete: bool = False


def result_from_entry(
    entry: JournalEntry, *, outcome: Outcome | None = None, audit_incomplete: bool = False
) -> SyscallResult:
    """Rebuild the answer that an entry recorded, without running anything."""
    artifact = entry.artifact
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
    }
    if isinstance(artifact, RefusalArtifact):
        return SyscallResult(**common, reason=artifact.reason.value, detail=artifact.detail)
    if isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
        receipt = artifact.receipt
        return SyscallResult(
            **common,
            result=artifact.result,
            problem=None if artifact.problem is None else artifact.problem.model_dump(),
            receipt=None if receipt is None else Receipt.model_validate(receipt.model_dump()),
        )
    raise ValueError(f"a {entry.kind} entry records no syscall result")

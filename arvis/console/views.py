"""How the console shows journal entries and confirmations: plain values for templates.

Nothing here decides anything. It reads the typed artifacts of ``arvis.domain.journal``
and says, in words, what each entry records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arvis.domain.boundary import UNCERTAIN_BOUNDARIES, EffectBoundary
from arvis.domain.definitions import ToolDefinition
from arvis.domain.journal import (
    ConsentArtifact,
    ExecutionArtifact,
    RecoveryArtifact,
    RefusalArtifact,
    ResolutionArtifact,
    body_dict,
)
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.ports import ConfirmationRecord, JournalEntry


@dataclass(frozen=True, slots=True)
class BoundaryInfo:
    name: str
    css: str
    meaning: str


BOUNDARIES: dict[str, BoundaryInfo] = {
    info.name: info
    for info in (
        BoundaryInfo(
            "PRE_EFFECT_REFUSAL", "b-refusal", "Refused at admission: nothing was minted or run."
        ),
        BoundaryInfo(
            "EFFECT_NOT_STARTED", "b-not-started", "Dispatched, but provably did not start."
        ),
        BoundaryInfo(
            "EFFECT_STARTED",
            "b-started",
            "Known to have started; its completion was not observed. It may or may not have"
            " finished.",
        ),
        BoundaryInfo("EFFECT_COMPLETED", "b-completed", "The tool returned a result."),
        BoundaryInfo(
            "EFFECT_FAILED", "b-failed", "The effect started and the tool reported a failure."
        ),
        BoundaryInfo(
            "EFFECT_STATE_UNKNOWN",
            "b-unknown",
            "Not even known whether the effect started (a deadline, a crash, a lost journal).",
        ),
    )
}
UNCERTAIN = frozenset(b.value for b in UNCERTAIN_BOUNDARIES)


def pretty(value: Any) -> str:
    """JSON for a person: indented, non-ASCII kept; the template escapes it."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@dataclass
class EntryRow:
    """One row of a run's timeline."""

    entry: JournalEntry
    tool: str
    outcome: str
    detail: str | None = None
    boundary: BoundaryInfo | None = None
    result_label: str | None = None
    result_json: str | None = None
    body_json: str = ""
    uncertain: bool = False
    resolves: int | None = None
    """For a resolution: the position of the entry it resolves."""
    resolved_by: EntryRow | None = None
    """For an uncertain entry: the resolution entry beside it, once there is one."""
    problem_code: str | None = None


def entry_row(entry: JournalEntry) -> EntryRow:
    artifact = entry.artifact
    boundary = BOUNDARIES.get(entry.boundary) if entry.boundary else None
    row = EntryRow(
        entry=entry,
        tool=artifact.tool,
        outcome=entry.kind,
        boundary=boundary,
        body_json=pretty(body_dict(entry.body_text)),
        uncertain=entry.boundary in UNCERTAIN and entry.kind in ("execution", "recovery"),
    )
    if isinstance(artifact, ExecutionArtifact):
        row.outcome = "executed"
        if artifact.problem is not None:
            row.result_label, row.result_json = "Problem", pretty(artifact.problem.model_dump())
            row.problem_code = artifact.problem.code
            row.detail = artifact.problem.code
        else:
            row.result_label, row.result_json = "Result", pretty(artifact.result)
    elif isinstance(artifact, RefusalArtifact):
        row.outcome = f"refused: {artifact.reason.value}"
        row.detail = artifact.detail
        row.result_label, row.result_json = (
            "Denial",
            pretty(artifact.denial.model_dump(mode="json")),
        )
    elif isinstance(artifact, RecoveryArtifact):
        row.outcome = "recovered"
        row.detail = f"{artifact.problem.code}: {artifact.problem.detail}"
        row.result_label, row.result_json = "Problem", pretty(artifact.problem.model_dump())
    elif isinstance(artifact, ConsentArtifact):
        decision = artifact.decision.value.lower()
        row.outcome = f"consent {decision}"
        who = artifact.decided_by.principal_id
        progress = (
            f" ({artifact.approvals} of {artifact.quorum})"
            if artifact.quorum is not None and artifact.quorum > 1
            else ""
        )
        row.detail = f"by {who}{progress}" + (f": {artifact.reason}" if artifact.reason else "")
    elif isinstance(artifact, ResolutionArtifact):
        resolved = BOUNDARIES[artifact.boundary.value]
        row.outcome = f"resolved as {resolved.name}"
        row.resolves = artifact.resolves.position
        row.detail = f"by {artifact.resolved_by.principal_id}: {artifact.evidence}"
    return row


def timeline(entries: list[JournalEntry]) -> list[EntryRow]:
    """The rows in chain order, each resolution set beside the entry it resolves."""
    rows = [entry_row(entry) for entry in entries]
    by_position = {row.entry.position: row for row in rows}
    for row in rows:
        if row.resolves is not None and row.resolves in by_position:
            by_position[row.resolves].resolved_by = row
    return rows


@dataclass
class ConfirmationView:
    record: ConfirmationRecord
    arguments: str
    digest: str
    effect: str | None = None
    replay_safety: str | None = None
    approvers: list[str] = field(default_factory=list)

    @property
    def progress(self) -> str:
        got, need = len(self.record.approvals), self.record.quorum
        return f"{got} of {need} approval{'s' if need != 1 else ''}"

    @property
    def decided_at(self) -> datetime | None:
        return self.record.decided_at


def confirmation_view(
    record: ConfirmationRecord, definitions: dict[str, ToolDefinition]
) -> ConfirmationView:
    definition = definitions.get(record.tool)
    return ConfirmationView(
        record=record,
        arguments=pretty(record.payload),
        # The same canonicalisation the syscall froze the payload with: the same digest.
        digest=freeze_payload(record.payload).digest,
        effect=None if definition is None else definition.effect.value,
        replay_safety=None if definition is None else definition.replay_safety.value,
        approvers=[a.principal_id for a in record.approvals],
    )


def boundary_legend() -> list[BoundaryInfo]:
    return [BOUNDARIES[b.value] for b in EffectBoundary]

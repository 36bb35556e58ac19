"""How the console shows journal entries and confirmations: plain values for templates.

Nothing here decides anything. It reads the typed artifacts of ``arvis.domain.journal``
and says, in words, what each entry records.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arvis.domain.boundary import UNCERTAIN_BOUNDARIES, EffectBoundary
from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import PayloadError
from arvis.domain.identity import acting_for
from arvis.domain.journal import (
    ConsentArtifact,
    ExecutionArtifact,
    RecoveryArtifact,
    RefusalArtifact,
    ResolutionArtifact,
    body_dict,
    caller,
)
from arvis.domain.payload import freeze_payload
from arvis.domain.redaction import REDACTED
from arvis.lifecycle.records import ConfirmationRecord, JournalEntry


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
    caller: str | None = None
    """Whose call or decision it was: the principal, and its key when it was one;
    ``<agent> for <person>`` when an agent acted for a person (issue 26)."""
    duration: str | None = None
    """For an attempt: from admission (the capability's mint) to its entry."""
    policy: str | None = None
    """Which policy decided, by id, as the entry's snapshot records it."""
    arguments: str | None = None
    """The decision's frozen arguments as stored (redacted fields as their digests)."""
    arguments_check: str | None = None
    """Whether the arguments shown are those the entry's digest names: ``matches``,
    ``redacted`` (not checkable in clear), or ``differs`` (the decision row was changed)."""


STATE_WORDS = {
    "PENDING": "waiting",
    "APPROVED": "approved",
    "RESERVED": "in use",
    "CONSUMED": "used",
    "DENIED": "denied",
    "EXPIRED": "expired",
}
"""A confirmation's state in words: CONSUMED beside APPROVED is jargon (issue 27)."""


def acting(principal: str | None, actors: str | Sequence[str] | None) -> str:
    """Who a run or a consent is of, as the timeline says who made a call (issue 26):
    ``agent <agent> for <person>`` when agents acted for the principal, else the principal."""
    return acting_for(principal or "—", actors)


def duration_text(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.0f} min"


def _policy_text(engine: str | None, version: str | None, ids: tuple[str, ...]) -> str | None:
    if not ids and engine is None:
        return None
    named = ", ".join(ids) if ids else "no rule id recorded"
    return f"{named} ({engine or 'policy'} {version or ''})".replace(" )", ")")


def _attempted(row: EntryRow, artifact: ExecutionArtifact | RecoveryArtifact) -> None:
    if artifact.capability is not None:
        spent = row.entry.recorded_at - artifact.capability.minted_at
        row.duration = duration_text(max(spent.total_seconds(), 0.0))
    if artifact.policy is not None:
        p = artifact.policy
        row.policy = _policy_text(p.engine, p.version, p.policy_ids)


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
        caller=caller(artifact),
    )
    if isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
        _attempted(row, artifact)
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
        denial = artifact.denial
        row.policy = _policy_text(denial.policy_engine, denial.policy_version, denial.policy_ids)
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


def timeline(
    entries: list[JournalEntry], arguments: dict[str, Any] | None = None
) -> list[EntryRow]:
    """The rows in chain order, each resolution set beside the entry it resolves, and
    each attempt with its decision's frozen arguments (``arguments`` by causal id)."""
    rows = [entry_row(entry) for entry in entries]
    for row in rows:
        found = (arguments or {}).get(row.entry.causal_id)
        if found is not None and row.entry.kind in ("execution", "refusal", "recovery"):
            row.arguments = pretty(found)
            row.arguments_check = _check_arguments(found, row.entry.body.get("payload_digest"))
    by_position = {row.entry.position: row for row in rows}
    for row in rows:
        if row.resolves is not None and row.resolves in by_position:
            by_position[row.resolves].resolved_by = row
    return rows


def _check_arguments(stored: Any, digest: Any) -> str | None:
    """The stored arguments against the digest the chain keeps: the decisions row is not
    part of the chain, so the page says whether what it shows is what was decided."""
    if not isinstance(digest, str):
        return None
    try:
        if freeze_payload(stored).digest == digest:
            return "matches"
    except PayloadError:
        return "differs"
    return "redacted" if REDACTED in json.dumps(stored) else "differs"


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
        # The digest the syscall froze the payload with (a redacted payload is stored
        # without its clear fields, so it is not recomputed from what is stored).
        digest=record.payload_digest or freeze_payload(record.payload).digest,
        effect=None if definition is None else definition.effect.value,
        replay_safety=None if definition is None else definition.replay_safety.value,
        approvers=[a.principal_id for a in record.approvals],
    )


def boundary_legend() -> list[BoundaryInfo]:
    return [BOUNDARIES[b.value] for b in EffectBoundary]

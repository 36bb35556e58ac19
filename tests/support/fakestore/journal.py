"""The tail of ``arvis_journal`` every appending step shares: place the entry at the
run's head, hash it into the chain, flag the run, and do what the entry triggers do
(an open ``resolutions`` row for an attempt journaled uncertain, an outbox event)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from arvis.domain.attempt import AttemptKey
from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import IntegrityConflict
from arvis.domain.journal import (
    ConsentArtifact,
    ExecutionArtifact,
    JournalArtifact,
    JournalKind,
    RecoveryArtifact,
    RefusalArtifact,
    ResolutionArtifact,
)
from arvis.lifecycle.journal import chain_hash
from arvis.lifecycle.records import JournalEntry
from tests.support.fakestore.tables import ResolutionRow, StoredEntry, Tables

# The boundaries an entry trigger treats as uncertain (revision 0006).
UNCERTAIN = ("EFFECT_STARTED", "EFFECT_STATE_UNKNOWN")

_KINDS: tuple[tuple[type[JournalArtifact], str], ...] = (
    (ExecutionArtifact, "execution"),
    (RefusalArtifact, "refusal"),
    (RecoveryArtifact, "recovery"),
    (ConsentArtifact, "confirmation"),
    (ResolutionArtifact, "resolution"),
)


class Refused(Exception):
    """A step that raises inside the server function: nothing it did is kept."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def kind_of(artifact: JournalArtifact) -> str:
    for model, kind in _KINDS:
        if isinstance(artifact, model):
            return kind
    raise TypeError(f"no journal kind for {type(artifact).__name__}")


def stamp(moment: datetime) -> str:
    """The recorded time as the chain hashes it (and timestamptz keeps it)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class Append:
    key: AttemptKey
    kind: str
    intent: str | None
    boundary: str | None
    retryable: bool
    body_text: str
    recorded: str
    flag: str | None


def append_entry(now: datetime, t: Tables, a: Append) -> JournalEntry:
    """Place ``a`` at the run's head; ``now`` is the database's clock."""
    k = a.key
    run = t.runs.get((k.tenant_id, k.run_id))
    if run is None:
        raise Refused(IntegrityConflict(f"run {k.run_id} does not exist", None))
    position = run.journal_length + 1
    entry_hash = chain_hash(
        prev_hash=run.journal_head,
        tenant_id=k.tenant_id,
        run_id=k.run_id,
        position=position,
        kind=a.kind,
        causal_id=k.causal_id,
        idempotency_key=k.idempotency_key,
        attempt=k.attempt,
        intent_id=a.intent,
        boundary=a.boundary,
        recorded_at=a.recorded,
        body_text=a.body_text,
    )
    reason = run.audit_incomplete_reason
    if a.flag is not None:
        reason = a.flag if reason is None else f"{reason}; {a.flag}"
    t.runs[(k.tenant_id, k.run_id)] = replace(
        run,
        journal_length=position,
        journal_head=entry_hash,
        audit_incomplete=run.audit_incomplete or a.flag is not None,
        audit_incomplete_reason=reason,
    )
    entry = JournalEntry.placed(
        k,
        JournalKind(a.kind),
        a.intent,
        None if a.boundary is None else EffectBoundary(a.boundary),
        position=position,
        prev_hash=run.journal_head,
        entry_hash=entry_hash,
        body_text=a.body_text,
        recorded_at=datetime.fromisoformat(a.recorded),
    )
    tenant, key, attempt = k.tenant_id, k.idempotency_key, k.attempt
    t.entries[(tenant, k.run_id, position)] = StoredEntry(entry, a.retryable)
    if attempt is not None:
        t.by_attempt[(tenant, key, attempt)] = (tenant, k.run_id, position)
        t.last_attempt[(tenant, key)] = max(t.last_attempt.get((tenant, key), 0), attempt)
    if a.kind == "resolution":
        t.events = (*t.events, ("effect.resolved", f"{k.run_id}:{position}"))
    elif a.boundary in UNCERTAIN:
        if attempt is not None:
            t.resolutions.setdefault(
                (tenant, key, attempt),
                ResolutionRow(
                    run_id=k.run_id,
                    causal_id=k.causal_id,
                    uncertain_position=position,
                    next_ask_at=now,
                ),
            )
        t.events = (*t.events, ("effect.uncertain", f"{k.run_id}:{position}"))
    return entry

"""The steps that append to a run's chain: :meth:`PgJournal.journal` (every entry of
the lifecycle, through ``arvis_journal``), :meth:`~PgJournal.resolve` and
:meth:`~PgJournal.approve` (which append through it on the server).

``arvis_journal`` takes one typed argument, ``arvis_journal_step``
(``store/sql/arvis_journal_step.sql``): :func:`journal_record` builds it, by name,
from a :class:`JournalAppend`, and is the only Python that does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from psycopg_pool import AsyncConnectionPool

from arvis.domain.attempt import AttemptKey
from arvis.domain.boundary import EffectBoundary
from arvis.domain.journal import JournalKind, artifact_text
from arvis.lifecycle.records import JournalEntry
from arvis.lifecycle.writes import (
    AppendAnswer,
    ApprovalStep,
    ApproveAnswer,
    ConsentRenewal,
    JournalAppend,
    Resolution,
    ResolveAnswer,
)
from arvis.store.pool import PgPool
from arvis.store.statements import APPROVE_SQL, JOURNAL_SQL, RESOLVE_SQL


def stamp(moment: datetime) -> str:
    """A time as the chain hashes it (and the statements take it): UTC, microseconds."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def journal_record(append: JournalAppend, body_text: str, recorded_at: str) -> str:
    """``append`` as the one JSON record ``arvis_journal`` takes (its fields are those
    of ``arvis_journal_step``). Parts that do not apply are left out: absent is NULL,
    and an absent switch is false."""
    key = append.key
    record: dict[str, Any] = {
        "tenant": key.tenant_id,
        "run": key.run_id,
        "kind": append.artifact.kind.value,
        "causal": key.causal_id,
        "idempotency_key": key.idempotency_key,
        "attempt": key.attempt,
        "intent": append.intent_id,
        "boundary": None if append.boundary is None else append.boundary.value,
        "retryable": append.retryable,
        "body": body_text,
        "recorded_at": recorded_at,
    }
    if append.settle:
        record["settle"] = True
        record["release_budgets"] = append.release_budgets
    bind = append.bind
    if bind is not None:
        record["bind_plan"] = bind.plan_id
        record["bind_tool"] = bind.tool
        record["bind_digest"] = bind.payload_digest
        record["bind_payload"] = bind.payload_text
    change = append.confirmation
    if change is not None:
        record["confirmation"] = change.confirmation_id
        record["confirmation_from"] = [state.value for state in change.from_states]
        record["confirmation_to"] = change.to_state.value
        record["confirmation_strict"] = change.strict
        record["decided_by"] = change.decided_by
        record["reason"] = change.reason
    if append.flag is not None:
        record["flag"] = append.flag
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _renewal_json(renewal: ConsentRenewal | None) -> str | None:
    """The consent's next round as ``arvis_resolve`` takes it (one jsonb record)."""
    if renewal is None:
        return None
    approver = renewal.approver
    return json.dumps(
        {
            "confirmation_id": renewal.confirmation.confirmation_id,
            "round": renewal.round,
            "state": renewal.to_state.value,
            "expires_at": stamp(renewal.expires_at),
            "decided_by": renewal.decided_by,
            "approver": None
            if approver is None
            else {
                "principal_id": approver.principal_id,
                "auth_method": approver.auth_method,
                "key_id": approver.key_id,
                "groups": approver.groups or [],
            },
        }
    )


class JournalHeader(NamedTuple):
    """What a journaling step knows of the entry before the statement places it."""

    key: AttemptKey
    kind: JournalKind
    intent_id: str | None = None
    boundary: EffectBoundary | None = None


class PgJournal(PgPool):
    """The journaling steps, and the observers told of every entry appended."""

    def __init__(self, pool: AsyncConnectionPool, fingerprint: str) -> None:
        super().__init__(pool, fingerprint)
        self.append_observers: list[Callable[[JournalEntry], None]] = []
        """Told of every entry a step appended, after its commit (the checkpointer,
        the witness feed). An observer must not block and must not raise."""

    async def _append(
        self, sql: str, params: tuple[Any, ...], header: JournalHeader, body: str, at: str
    ) -> tuple[Any, JournalEntry | None]:
        """Run one journaling statement; answer its status and the entry it answered
        (None: none), built in one place for every step that appends. The append
        observers hear of each entry appended, whichever step appended it."""
        status, position, prev_hash, entry_hash = await self._row(sql, params)
        if position is None:
            return status, None
        assert prev_hash is not None
        assert entry_hash is not None
        entry = JournalEntry.placed(
            header.key,
            header.kind,
            header.intent_id,
            header.boundary,
            position=position,
            prev_hash=prev_hash,
            entry_hash=entry_hash,
            body_text=body,
            recorded_at=datetime.fromisoformat(at),
        )
        # 'existing': a retried statement found its own append committed (the first
        # answer was lost), so nobody was told of it yet; telling twice is harmless.
        if status in ("appended", "existing"):
            for observe in self.append_observers:
                observe(entry)
        return status, entry

    async def journal(self, append: JournalAppend) -> AppendAnswer:
        body = artifact_text(append.artifact)
        at = stamp(append.recorded_at)
        header = JournalHeader(append.key, append.artifact.kind, append.intent_id, append.boundary)
        status, entry = await self._append(
            JOURNAL_SQL,
            (append.key.tenant_id, journal_record(append, body, at)),
            header,
            body,
            at,
        )
        return AppendAnswer(status=status, entry=entry)

    async def resolve(self, resolution: Resolution) -> ResolveAnswer:
        body = artifact_text(resolution.artifact)
        at = stamp(resolution.recorded_at)
        boundary = resolution.artifact.boundary
        key = resolution.key
        params = (
            key.tenant_id,
            key.run_id,
            key.causal_id,
            key.idempotency_key,
            key.attempt,
            resolution.uncertain_position,
            boundary.value,
            resolution.resolved_by,
            body,
            at,
            _renewal_json(resolution.renewal),
        )
        # The resolution's entry is the decision's, not the attempt's (as arvis_resolve
        # appends it).
        header = JournalHeader(key.decision(), JournalKind.RESOLUTION, boundary=boundary)
        status, entry = await self._append(RESOLVE_SQL, params, header, body, at)
        return ResolveAnswer(status=status, entry=entry)

    async def approve(self, step: ApprovalStep) -> ApproveAnswer:
        record = step.confirmation
        body = artifact_text(step.artifact)
        at = stamp(step.recorded_at)
        params = (
            record.tenant_id,
            record.run_id,
            record.causal_id,
            record.idempotency_key,
            record.confirmation_id,
            record.round,
            step.approver_principal,
            step.approver_method,
            step.approver_key_id,
            list(step.approver_groups),
            step.seen,
            step.to_state.value,
            step.decided_by,
            body,
            at,
        )
        header = JournalHeader(record.key, JournalKind.CONFIRMATION)
        status, entry = await self._append(APPROVE_SQL, params, header, body, at)
        return ApproveAnswer(status=status, entry=entry if status == "appended" else None)

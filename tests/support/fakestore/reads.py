"""The reads of :class:`arvis.lifecycle.ports.LifecycleReads` on one snapshot of the fake
store's tables (what :class:`arvis.store.reads.PgReads` reads in one REPEATABLE READ
transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.domain.checkpoints import Checkpoint
from arvis.domain.ids import ConfirmationId, IdempotencyKey, RunId, TenantId
from arvis.domain.journal import ExecutionArtifact, RecoveryArtifact, RefusalArtifact
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.journal import entry_row
from arvis.lifecycle.records import (
    Approval,
    BudgetUsage,
    ChainRow,
    ConfirmationRecord,
    JournalEntry,
    RunRecord,
    RunStatus,
    RunSummary,
    UncertainAttempt,
)
from arvis.lifecycle.runs import RunQuery
from tests.support.fakestore.tables import ConfirmationRow, RunRow, Tables


def confirmation_record(
    t: Tables, row: ConfirmationRow, read_at: datetime | None = None
) -> ConfirmationRecord:
    approvals = sorted(
        (
            a
            for (tenant, cid, round_, _), a in t.approvals.items()
            if (tenant, cid, round_) == (row.tenant_id, row.confirmation_id, row.round)
        ),
        key=lambda a: a.position,
    )
    return ConfirmationRecord(
        confirmation_id=ConfirmationId(row.confirmation_id),
        tenant_id=TenantId(row.tenant_id),
        run_id=RunId(row.run_id),
        causal_id=row.causal_id,
        idempotency_key=IdempotencyKey(row.idempotency_key),
        tool=row.tool,
        payload=row.payload,
        payload_digest=row.payload_digest,
        state=ConfirmationState(row.state),
        context=row.context,
        decided_by=row.decided_by,
        decision_reason=row.decision_reason,
        decided_at=row.decided_at,
        expires_at=row.expires_at,
        created_at=row.created_at,
        approver_groups=row.approver_groups,
        quorum=row.quorum,
        definition_fingerprint=row.definition_fingerprint,
        policy_digest=row.policy_digest,
        approvals=tuple(
            Approval(
                principal_id=a.principal_id,
                auth_method=a.auth_method,
                key_id=a.key_id,
                groups=a.groups,
                decided_at=a.decided_at,
                position=a.position,
            )
            for a in approvals
        ),
        round=row.round,
        renewed_at=row.renewed_at,
        read_at=read_at,
    )


def uncertain_attempt(t: Tables, tenant: str, key: str, attempt: int) -> UncertainAttempt | None:
    row = t.resolutions.get((tenant, key, attempt))
    if row is None:
        return None
    entry = t.entry(tenant, row.run_id, row.uncertain_position)
    if entry is None:
        return None
    decision = t.decisions.get((tenant, row.run_id, row.causal_id))
    return UncertainAttempt(
        entry=entry,
        resolved=None if row.boundary is None else EffectBoundary(row.boundary),
        resolution_position=row.position,
        asks=row.asks,
        payload=None if decision is None else decision.payload,
    )


class FakeReads:
    """Reads of one committed state of the tables (never changed: a snapshot)."""

    def __init__(self, tables: Tables, now: datetime | None = None) -> None:
        self._t = tables
        self._now = now
        """The database's clock when the snapshot was taken: a confirmation read says it
        (``read_at``), as the PostgreSQL reads do, so expiry is judged by one clock."""

    async def run(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None:
        row = self._t.runs.get((tenant_id, run_id))
        if row is None:
            return None
        return RunRecord(
            tenant_id=tenant_id,
            run_id=run_id,
            plan_id=row.plan_id,  # type: ignore[arg-type]
            journal_length=row.journal_length,
            journal_head=row.journal_head,
            audit_incomplete=row.audit_incomplete,
            principal_id=row.principal_id,
            evidence_broken_at=row.evidence_broken_at,
            evidence_fault=row.evidence_fault,
        )

    async def entry_at(
        self, tenant_id: TenantId, run_id: RunId, position: int
    ) -> JournalEntry | None:
        return self._t.entry(tenant_id, run_id, position)

    async def page(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[JournalEntry]:
        run = self._t.runs.get((tenant_id, run_id))
        if run is None:
            return []
        found: list[JournalEntry] = []
        for position in range(max(after, 0) + 1, run.journal_length + 1):
            if len(found) == limit:
                break
            entry = self._t.entry(tenant_id, run_id, position)
            if entry is not None:
                found.append(entry)
        return found

    async def chain(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[ChainRow]:
        return [entry_row(e) for e in await self.page(tenant_id, run_id, after, limit)]

    async def checkpoints(
        self,
        tenant_id: TenantId,
        run_id: RunId,
        *,
        at_least: int = 0,
        first: int | None = None,
        last: int | None = None,
    ) -> list[Checkpoint]:
        found: list[Checkpoint] = [
            c
            for (tenant, run, length), c in sorted(self._t.checkpoints.items())
            if (tenant, run) == (tenant_id, run_id) and length >= at_least
        ]
        if last is not None:
            return found[-last:] if last else []
        return found if first is None else found[:first]

    async def in_flight_intents(self, tenant_id: TenantId, run_id: RunId) -> set[str]:
        return {
            a.intent_id
            for a in self._t.attempts.values()
            if (a.tenant_id, a.run_id) == (tenant_id, run_id)
        }

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord | None:
        row = self._t.confirmations.get((tenant_id, confirmation_id))
        return None if row is None else confirmation_record(self._t, row, self._now)

    async def run_confirmations(
        self, tenant_id: TenantId, run_id: RunId, state: ConfirmationState, limit: int
    ) -> list[ConfirmationRecord]:
        rows = sorted(
            (
                row
                for (tenant, _), row in self._t.confirmations.items()
                if (tenant, row.run_id, row.state) == (tenant_id, run_id, state.value)
            ),
            key=lambda row: (row.created_at, row.confirmation_id),
        )
        return [confirmation_record(self._t, row) for row in rows[:limit]]

    async def payloads(
        self, tenant_id: TenantId, run_id: RunId, causal_ids: Sequence[str]
    ) -> dict[str, Any]:
        wanted = set(causal_ids)
        return {
            causal: d.payload
            for (tenant, run, causal), d in self._t.decisions.items()
            if (tenant, run) == (tenant_id, run_id) and causal in wanted
        }

    async def confirmations(
        self, tenant_id: TenantId, state: ConfirmationState | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]:
        rows = sorted(
            (
                row
                for (tenant, cid), row in self._t.confirmations.items()
                if tenant == tenant_id
                and (state is None or row.state == state.value)
                and (after is None or cid > after)
            ),
            key=lambda row: row.confirmation_id,
        )
        return [confirmation_record(self._t, row, self._now) for row in rows[:limit]]

    async def attempt_entry(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> JournalEntry | None:
        stored = self._t.attempt_entry(tenant_id, key, attempt)
        if stored is None or stored.entry.run_id != run_id:
            return None
        return stored.entry

    async def uncertain(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> UncertainAttempt | None:
        found = uncertain_attempt(self._t, tenant_id, key, attempt)
        if found is None or found.entry.run_id != run_id:
            return None
        return found

    async def budget_usage(
        self, tenant_id: TenantId, windows: Sequence[tuple[str, datetime]]
    ) -> list[BudgetUsage]:
        wanted = set(windows)
        rows = [
            BudgetUsage(budget=budget, scope_key=scope, window_start=start, used=used)
            for (tenant, budget, scope, start), used in self._t.budget_usage.items()
            if tenant == tenant_id and (budget, start) in wanted
        ]
        return sorted(rows, key=lambda u: (u.budget, u.scope_key))

    async def runs(self, tenant_id: TenantId, query: RunQuery) -> list[RunSummary]:
        t = self._t
        found = [
            self._summary(tenant_id, RunId(run_id), row)
            for (tenant, run_id), row in t.runs.items()
            if tenant == tenant_id
        ]
        wanted = [s for s in found if _selected(s, query)]
        wanted.sort(key=lambda s: (s.created_at, s.run_id), reverse=True)
        return wanted[: query.limit + 1]

    def _summary(self, tenant_id: TenantId, run_id: RunId, row: RunRow) -> RunSummary:
        t = self._t
        last = t.entry(tenant_id, run_id, row.journal_length)
        waiting = sum(
            1
            for c in t.confirmations.values()
            if (c.tenant_id, c.run_id, c.state) == (tenant_id, run_id, "PENDING")
        )
        uncertain = sum(
            1
            for (tenant, _, _), r in t.resolutions.items()
            if tenant == tenant_id and r.run_id == run_id and r.boundary is None
        )
        status: RunStatus = "running"
        if row.audit_incomplete:
            status = "audit_incomplete"
        elif uncertain:
            status = "uncertain"
        elif waiting:
            status = "waiting_for_consent"
        elif last is not None and last.kind == "refusal":
            status = "refused"
        return RunSummary(
            run_id=run_id,
            created_at=row.created_at,
            entries=row.journal_length,
            last_activity=row.created_at if last is None else max(row.created_at, last.recorded_at),
            audit_incomplete=row.audit_incomplete,
            waiting=waiting,
            uncertain=uncertain,
            status=status,
            principal=row.principal_id,
            tools=tuple(
                sorted(
                    {
                        d.tool
                        for (tn, rn, _), d in t.decisions.items()
                        if (tn, rn) == (tenant_id, run_id)
                    }
                )
            ),
            actors=self._actors(tenant_id, run_id),
        )

    def _actors(self, tenant_id: TenantId, run_id: RunId) -> tuple[str, ...]:
        """The agents the run's calls record, as PgReads reads them: an execution's or
        a recovery's sealed context, a refusal's actor, a consent's, an attempt's."""
        t = self._t
        found: set[str] = set()
        for (tenant, run, _), stored in t.entries.items():
            artifact = stored.entry.artifact
            if (tenant, run) != (tenant_id, run_id):
                continue
            if isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
                if artifact.context is not None and artifact.context.actor is not None:
                    found.add(artifact.context.actor.principal_id)
            elif isinstance(artifact, RefusalArtifact) and artifact.actor is not None:
                found.add(artifact.actor.principal_id)
        contexts = [
            *(
                c.context
                for c in t.confirmations.values()
                if (c.tenant_id, c.run_id) == (tenant_id, run_id)
            ),
            *(
                a.context
                for a in t.attempts.values()
                if (a.tenant_id, a.run_id) == (tenant_id, run_id)
            ),
        ]
        found |= {str(c["actor"]["principal_id"]) for c in contexts if c.get("actor")}
        return tuple(sorted(found))


def _selected(s: RunSummary, q: RunQuery) -> bool:
    """The filters of PgReads.runs, on one summary."""
    active = s.last_activity
    checks = (
        q.containing is None or q.containing in s.run_id,
        q.status is None or s.status == q.status,
        q.principal is None or s.principal == q.principal,
        q.actor is None or q.actor in s.actors,
        q.tool is None or q.tool in s.tools,
        q.started_after is None or s.created_at >= q.started_after,
        q.started_before is None or s.created_at < q.started_before,
        q.active_after is None or (active is not None and active >= q.active_after),
        q.active_before is None or (active is not None and active < q.active_before),
        q.after is None or (s.created_at, s.run_id) < (q.after.created_at, q.after.run_id),
    )
    return all(checks)

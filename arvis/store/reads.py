"""Reads of the lifecycle on PostgreSQL, inside one read-only snapshot (see
:meth:`arvis.store.operations.PgOperations.reading`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row, tuple_row

from arvis.domain.authorization import ConsentPolicy
from arvis.domain.boundary import EffectBoundary
from arvis.domain.checkpoints import Checkpoint
from arvis.domain.ids import ConfirmationId, RunId, TenantId
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.records import (
    Approval,
    BudgetUsage,
    ChainRow,
    ConfirmationRecord,
    JournalEntry,
    RunRecord,
    RunSummary,
    UncertainAttempt,
)
from arvis.lifecycle.runs import RunQuery
from arvis.store.columns import entry_actor, names_an_actor

_RUN = (
    "SELECT tenant_id, run_id, plan_id, journal_length, journal_head, audit_incomplete,"
    " principal_id, evidence_broken_at, evidence_fault"
    " FROM runs WHERE tenant_id = %s AND run_id = %s"
)
_CHECKPOINT_COLUMNS = "tenant_id, run_id, length, head_hash, signed_at, key_id, signature"
_CHECKPOINTS = (
    f"SELECT {_CHECKPOINT_COLUMNS} FROM run_checkpoints"
    " WHERE tenant_id = %s AND run_id = %s AND length >= %s ORDER BY length LIMIT %s"
)
_LAST_CHECKPOINTS = (
    f"SELECT * FROM (SELECT {_CHECKPOINT_COLUMNS} FROM run_checkpoints"
    " WHERE tenant_id = %s AND run_id = %s AND length >= %s ORDER BY length DESC LIMIT %s) c"
    " ORDER BY length"
)
_IN_FLIGHT_INTENTS = "SELECT intent_id FROM attempts WHERE tenant_id = %s AND run_id = %s"
_ENTRY_COLUMNS = (
    "tenant_id, run_id, position, kind, causal_id, idempotency_key, attempt, intent_id,"
    " boundary, body AS body_text, prev_hash, entry_hash, recorded_at"
)
_ENTRY_AT = (
    f"SELECT {_ENTRY_COLUMNS} FROM journal_entries"
    " WHERE tenant_id = %s AND run_id = %s AND position = %s"
)
_PAGE = (
    f"SELECT {_ENTRY_COLUMNS} FROM journal_entries"
    " WHERE tenant_id = %s AND run_id = %s AND position > %s ORDER BY position LIMIT %s"
)
_CHAIN = (
    "SELECT position, prev_hash, entry_hash, kind, causal_id, idempotency_key, attempt,"
    " intent_id, boundary, recorded_at, body FROM journal_entries"
    " WHERE tenant_id = %s AND run_id = %s AND position > %s ORDER BY position LIMIT %s"
)
# Each approval of the current round with who made it (principal and key, from
# authentication) and when; earlier rounds' approvals stay in the journal and the table.
APPROVALS = (
    "(SELECT coalesce(jsonb_agg(jsonb_build_object('principal_id', a.principal_id,"
    " 'auth_method', a.auth_method, 'key_id', a.key_id, 'groups', to_jsonb(a.groups),"
    " 'decided_at', a.decided_at, 'position', a.position) ORDER BY a.position), '[]')"
    " FROM confirmation_approvals a WHERE a.tenant_id = {t}.tenant_id"
    " AND a.confirmation_id = {t}.confirmation_id AND a.round = {t}.round)"
)
CONFIRMATION_COLUMNS = (
    "confirmation_id, tenant_id, run_id, causal_id, idempotency_key, tool, payload,"
    " payload_digest, state,"
    " context, decided_by, decision_reason AS reason, decided_at, expires_at, created_at,"
    " approver_groups, quorum, definition_fingerprint, policy_digest, policy, round, renewed_at,"
    # The database's clock with the record: expiry is judged by it (issue 24).
    " now() AS read_at, " + APPROVALS.format(t="confirmations") + " AS approvals"
)
_CONFIRMATION = (
    f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations"
    " WHERE tenant_id = %s AND confirmation_id = %s"
)
_CONFIRMATIONS = (
    f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE tenant_id = %s"
    " AND (%s::text IS NULL OR state = %s) AND (%s::text IS NULL OR confirmation_id > %s)"
    " ORDER BY confirmation_id LIMIT %s"
)
# A run's confirmations of one state (the run page's "waiting for consent").
_RUN_CONFIRMATIONS = (
    f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE tenant_id = %s AND run_id = %s"
    " AND state = %s ORDER BY created_at, confirmation_id LIMIT %s"
)
# The frozen arguments each decision keeps (redacted as [journal] redact says).
_PAYLOADS = (
    "SELECT causal_id, payload FROM decisions WHERE tenant_id = %s AND run_id = %s"
    " AND causal_id = ANY(%s)"
)
_ATTEMPT_ENTRY = (
    f"SELECT {_ENTRY_COLUMNS} FROM journal_entries WHERE idempotency_key = %s"
    " AND attempt = %s AND tenant_id = %s AND run_id = %s"
)
UNCERTAIN_COLUMNS = (
    "r.boundary AS resolved, r.position AS resolution_position, r.asks, d.payload,"
    " e.tenant_id, e.run_id, e.position, e.kind, e.causal_id, e.idempotency_key, e.attempt,"
    " e.intent_id, e.boundary, e.body AS body_text, e.prev_hash, e.entry_hash, e.recorded_at"
    " FROM resolutions r"
    " JOIN journal_entries e ON e.tenant_id = r.tenant_id AND e.run_id = r.run_id"
    " AND e.position = r.uncertain_position"
    " LEFT JOIN decisions d ON d.tenant_id = r.tenant_id AND d.run_id = r.run_id"
    " AND d.causal_id = r.causal_id"
)
_UNCERTAIN = (
    f"SELECT {UNCERTAIN_COLUMNS} WHERE r.tenant_id = %s AND r.idempotency_key = %s"
    " AND r.attempt = %s AND r.run_id = %s"
)

T = TypeVar("T")


# The list of runs (arvis.lifecycle.runs): the status is named here, in the order
# that module's table gives, and filtered on with the last activity (the latest entry,
# or a decision asked for since: a call waiting for consent journals nothing).
# Every table of it is filtered on the tenant by value, not only through ``r``: Citus
# routes a query holding a recursive CTE (the actors, below) to the tenant's worker
# only when each of its tables is, and refuses it otherwise (FeatureNotSupported).
_RUN_OF = "{t}.tenant_id = %(t)s AND {t}.run_id = r.run_id"
# The agents that acted for the run's principal (issue 26), from what each call records:
# a journal entry's body (columns.entry_actor: a refusal's actor, a consent decision's,
# an execution's or a recovery's sealed context), a consent still PENDING (nothing of it
# is journaled yet) and an attempt in flight. The journal's distinct actors are read from
# ix_journal_entries_actor (revision 0019) one probe per actor: each step finds the next
# actor after the last (a loose index scan), so a long run costs what its agents count.
_ACTOR, _NAMES = entry_actor("e."), names_an_actor("e.")


def _next_actor(after: str) -> str:
    return (
        f"SELECT {_ACTOR} FROM journal_entries e WHERE {_RUN_OF.format(t='e')} AND {_NAMES}"
        f" AND {_ACTOR} > {after} ORDER BY {_ACTOR} LIMIT 1"
    )


_FIRST_ACTOR = _next_actor("''")
_ACTORS = (
    f"ARRAY(SELECT DISTINCT u.id FROM ((WITH RECURSIVE j(id) AS (({_FIRST_ACTOR})"
    f" UNION ALL SELECT ({_next_actor('j.id')}) FROM j WHERE j.id IS NOT NULL)"
    " SELECT id FROM j)"
    " UNION ALL SELECT c.context #>> '{actor,principal_id}' FROM confirmations c"
    f" WHERE {_RUN_OF.format(t='c')} AND c.state = 'PENDING'"
    " UNION ALL SELECT t.context #>> '{actor,principal_id}' FROM attempts t"
    f" WHERE {_RUN_OF.format(t='t')}"
    ") u WHERE u.id IS NOT NULL ORDER BY u.id)"
)
_RUNS = (
    "SELECT * FROM (SELECT s.*, CASE WHEN s.audit_incomplete THEN 'audit_incomplete'"
    " WHEN s.uncertain > 0 THEN 'uncertain' WHEN s.waiting > 0 THEN 'waiting_for_consent'"
    " WHEN s.last_kind = 'refusal' THEN 'refused' ELSE 'running' END AS status FROM ("
    "SELECT r.run_id, r.created_at, r.journal_length AS entries, r.audit_incomplete,"
    " r.principal_id AS principal, l.kind AS last_kind,"
    " greatest(r.created_at, l.recorded_at, (SELECT max(d.created_at) FROM decisions d"
    f" WHERE {_RUN_OF.format(t='d')})) AS last_activity,"
    f" (SELECT count(*) FROM confirmations c WHERE {_RUN_OF.format(t='c')}"
    " AND c.state = 'PENDING') AS waiting,"
    f" (SELECT count(*) FROM resolutions u WHERE {_RUN_OF.format(t='u')}"
    " AND u.boundary IS NULL) AS uncertain,"
    f" ARRAY(SELECT DISTINCT d.tool FROM decisions d WHERE {_RUN_OF.format(t='d')}"
    " ORDER BY d.tool) AS tools,"
    f" {_ACTORS} AS actors"
    " FROM runs r LEFT JOIN journal_entries l ON l.tenant_id = r.tenant_id"
    " AND l.run_id = r.run_id AND l.position = r.journal_length"
    " WHERE r.tenant_id = %(t)s AND (%(q)s::text IS NULL OR strpos(r.run_id, %(q)s) > 0)"
    " AND (%(principal)s::text IS NULL OR r.principal_id = %(principal)s)"
    f" AND (%(tool)s::text IS NULL OR EXISTS (SELECT 1 FROM decisions d"
    f" WHERE {_RUN_OF.format(t='d')} AND d.tool = %(tool)s))"
    " AND (%(started_after)s::timestamptz IS NULL OR r.created_at >= %(started_after)s)"
    " AND (%(started_before)s::timestamptz IS NULL OR r.created_at < %(started_before)s)"
    " AND (%(at)s::timestamptz IS NULL"
    " OR (r.created_at, r.run_id) < (%(at)s::timestamptz, %(run)s::text))) s) f"
    " WHERE (%(status)s::text IS NULL OR f.status = %(status)s)"
    " AND (%(actor)s::text IS NULL OR %(actor)s = ANY(f.actors))"
    " AND (%(active_after)s::timestamptz IS NULL OR f.last_activity >= %(active_after)s)"
    " AND (%(active_before)s::timestamptz IS NULL OR f.last_activity < %(active_before)s)"
    " ORDER BY f.created_at DESC, f.run_id DESC LIMIT %(limit)s"
)


def runs_parameters(query: RunQuery) -> dict[str, Any]:
    """The list's parameters; one row more than the page, to know whether one follows."""
    return {
        "t": None,
        "q": query.containing,
        "principal": query.principal,
        "actor": query.actor,
        "tool": query.tool,
        "status": query.status,
        "started_after": query.started_after,
        "started_before": query.started_before,
        "active_after": query.active_after,
        "active_before": query.active_before,
        "at": None if query.after is None else query.after.created_at,
        "run": None if query.after is None else query.after.run_id,
        "limit": query.limit + 1,
    }


def run_summary(row: Mapping[str, Any]) -> RunSummary:
    row = dict(row)
    row.pop("last_kind")
    row["tools"] = tuple(row["tools"] or ())
    row["actors"] = tuple(row["actors"] or ())
    return RunSummary(**row)


def uncertain_from(row: Mapping[str, Any]) -> UncertainAttempt:
    entry = {key: row[key] for key in JournalEntry.__slots__ if key in row}
    resolved = row["resolved"]
    return UncertainAttempt(
        entry=JournalEntry(**entry),
        resolved=None if resolved is None else EffectBoundary(resolved),
        resolution_position=row["resolution_position"],
        asks=row["asks"],
        payload=row["payload"],
    )


def _approval(item: Mapping[str, Any]) -> Approval:
    decided_at = item["decided_at"]
    return Approval(
        principal_id=item["principal_id"],
        auth_method=item["auth_method"],
        key_id=item["key_id"],
        groups=tuple(item.get("groups") or ()),
        decided_at=decided_at
        if isinstance(decided_at, datetime)
        else datetime.fromisoformat(decided_at),
        position=item["position"],
    )


_BUDGET_USAGE = (
    "SELECT u.budget, u.scope_key, u.window_start, u.used FROM budget_usage u"
    " JOIN unnest(%s::text[], %s::timestamptz[]) AS w(budget, window_start)"
    " ON w.budget = u.budget AND w.window_start = u.window_start"
    " WHERE u.tenant_id = %s ORDER BY u.budget, u.scope_key"
)


# Columns a confirmation record takes under their own names.
_CONFIRMATION_FIELDS = (
    "confirmation_id",
    "tenant_id",
    "run_id",
    "causal_id",
    "idempotency_key",
    "tool",
    "payload",
    "context",
    "decided_by",
    "decided_at",
    "expires_at",
    "created_at",
)


def confirmation_from(row: Mapping[str, Any]) -> ConfirmationRecord:
    return ConfirmationRecord(
        **{name: row[name] for name in _CONFIRMATION_FIELDS},
        state=ConfirmationState(row["state"]),
        decision_reason=row["reason"],
        approver_groups=tuple(row.get("approver_groups") or ()),
        quorum=row.get("quorum") or 1,
        definition_fingerprint=row.get("definition_fingerprint"),
        policy_digest=row.get("policy_digest"),
        policy=None if row.get("policy") is None else ConsentPolicy.model_validate(row["policy"]),
        approvals=tuple(_approval(item) for item in row.get("approvals") or ()),
        round=row.get("round") or 1,
        renewed_at=row.get("renewed_at"),
        read_at=row.get("read_at"),
        payload_digest=row.get("payload_digest"),
    )


class PgReads:
    """The reads of :class:`arvis.lifecycle.ports.LifecycleReads` on one connection."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    async def _one(
        self, sql: str, params: tuple[Any, ...], build: Callable[[dict[str, Any]], T]
    ) -> T | None:
        """The one row ``sql`` finds, built, or None."""
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(sql, params)
        row = await cursor.fetchone()
        return None if row is None else build(row)

    async def run(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None:
        return await self._one(_RUN, (tenant_id, run_id), lambda row: RunRecord(**row))

    async def entry_at(
        self, tenant_id: TenantId, run_id: RunId, position: int
    ) -> JournalEntry | None:
        return await self._one(
            _ENTRY_AT, (tenant_id, run_id, position), lambda row: JournalEntry(**row)
        )

    async def page(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[JournalEntry]:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_PAGE, (tenant_id, run_id, after, limit))
        return [JournalEntry(**row) for row in await cursor.fetchall()]

    async def chain(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[ChainRow]:
        cursor = self._conn.cursor(row_factory=tuple_row)
        await cursor.execute(_CHAIN, (tenant_id, run_id, after, limit))
        rows: list[ChainRow] = await cursor.fetchall()
        return rows

    async def checkpoints(
        self,
        tenant_id: TenantId,
        run_id: RunId,
        *,
        at_least: int = 0,
        first: int | None = None,
        last: int | None = None,
    ) -> list[Checkpoint]:
        cursor = self._conn.cursor(row_factory=tuple_row)
        if last is None:
            await cursor.execute(_CHECKPOINTS, (tenant_id, run_id, at_least, first))
        else:
            await cursor.execute(_LAST_CHECKPOINTS, (tenant_id, run_id, at_least, last))
        return [Checkpoint(*row) for row in await cursor.fetchall()]

    async def in_flight_intents(self, tenant_id: TenantId, run_id: RunId) -> set[str]:
        cursor = self._conn.cursor(row_factory=tuple_row)
        await cursor.execute(_IN_FLIGHT_INTENTS, (tenant_id, run_id))
        return {row[0] for row in await cursor.fetchall()}

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord | None:
        return await self._one(_CONFIRMATION, (tenant_id, confirmation_id), confirmation_from)

    async def confirmations(
        self, tenant_id: TenantId, state: ConfirmationState | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]:
        cursor = self._conn.cursor(row_factory=dict_row)
        wanted = None if state is None else state.value
        await cursor.execute(_CONFIRMATIONS, (tenant_id, wanted, wanted, after, after, limit))
        return [confirmation_from(row) for row in await cursor.fetchall()]

    async def run_confirmations(
        self, tenant_id: TenantId, run_id: RunId, state: ConfirmationState, limit: int
    ) -> list[ConfirmationRecord]:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_RUN_CONFIRMATIONS, (tenant_id, run_id, state.value, limit))
        return [confirmation_from(row) for row in await cursor.fetchall()]

    async def payloads(
        self, tenant_id: TenantId, run_id: RunId, causal_ids: Sequence[str]
    ) -> dict[str, Any]:
        cursor = self._conn.cursor(row_factory=tuple_row)
        await cursor.execute(_PAYLOADS, (tenant_id, run_id, list(causal_ids)))
        return {causal: payload for causal, payload in await cursor.fetchall()}

    async def attempt_entry(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> JournalEntry | None:
        return await self._one(
            _ATTEMPT_ENTRY, (key, attempt, tenant_id, run_id), lambda row: JournalEntry(**row)
        )

    async def uncertain(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> UncertainAttempt | None:
        return await self._one(_UNCERTAIN, (tenant_id, key, attempt, run_id), uncertain_from)

    async def budget_usage(
        self, tenant_id: TenantId, windows: Sequence[tuple[str, datetime]]
    ) -> list[BudgetUsage]:
        cursor = self._conn.cursor(row_factory=dict_row)
        names = [name for name, _ in windows]
        starts = [start for _, start in windows]
        await cursor.execute(_BUDGET_USAGE, (names, starts, tenant_id))
        return [BudgetUsage(**row) for row in await cursor.fetchall()]

    async def runs(self, tenant_id: TenantId, query: RunQuery) -> list[RunSummary]:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_RUNS, {**runs_parameters(query), "t": tenant_id})
        return [run_summary(row) for row in await cursor.fetchall()]

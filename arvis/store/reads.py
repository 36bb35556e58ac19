"""Reads of the lifecycle on PostgreSQL, inside one read-only snapshot (see
:meth:`arvis.store.operations.PgOperations.reading`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from arvis.domain.ids import ConfirmationId, RunId, TenantId
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.ports import ChainRow, ConfirmationRecord, JournalEntry, RunRecord

_RUN = (
    "SELECT tenant_id, run_id, plan_id, journal_length, journal_head, audit_incomplete"
    " FROM runs WHERE tenant_id = %s AND run_id = %s"
)
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
CONFIRMATION_COLUMNS = (
    "confirmation_id, tenant_id, run_id, causal_id, idempotency_key, tool, payload, state,"
    " context, decided_by, decision_reason AS reason, decided_at, expires_at, created_at"
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


def confirmation_from(row: Mapping[str, Any]) -> ConfirmationRecord:
    return ConfirmationRecord(
        confirmation_id=row["confirmation_id"],
        tenant_id=row["tenant_id"],
        run_id=row["run_id"],
        causal_id=row["causal_id"],
        idempotency_key=row["idempotency_key"],
        tool=row["tool"],
        payload=row["payload"],
        state=ConfirmationState(row["state"]),
        context=row["context"],
        decided_by=row["decided_by"],
        decision_reason=row["reason"],
        decided_at=row["decided_at"],
        expires_at=row["expires_at"],
        created_at=row["created_at"],
    )


class PgReads:
    """The reads of :class:`arvis.lifecycle.ports.LifecycleReads` on one connection."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    async def run(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_RUN, (tenant_id, run_id))
        row = await cursor.fetchone()
        return None if row is None else RunRecord(**row)

    async def entry_at(
        self, tenant_id: TenantId, run_id: RunId, position: int
    ) -> JournalEntry | None:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_ENTRY_AT, (tenant_id, run_id, position))
        row = await cursor.fetchone()
        return None if row is None else JournalEntry(**row)

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

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord | None:
        cursor = self._conn.cursor(row_factory=dict_row)
        await cursor.execute(_CONFIRMATION, (tenant_id, confirmation_id))
        row = await cursor.fetchone()
        return None if row is None else confirmation_from(row)

    async def confirmations(
        self, tenant_id: TenantId, state: ConfirmationState | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]:
        cursor = self._conn.cursor(row_factory=dict_row)
        wanted = None if state is None else state.value
        await cursor.execute(_CONFIRMATIONS, (tenant_id, wanted, wanted, after, after, limit))
        return [confirmation_from(row) for row in await cursor.fetchall()]

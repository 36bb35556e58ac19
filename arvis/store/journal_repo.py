"""The journal on PostgreSQL: appends through ``arvis_journal_append``, reads by page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import DBAPIError

from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.ports import ChainRow, JournalEntry
from arvis.store.errors import sqlstate_of
from arvis.store.repo_base import SqlRepository


def _entry(row: RowMapping) -> JournalEntry:
    return JournalEntry(**dict(row))


_JOURNAL_COLUMNS = (
    "tenant_id, run_id, position, kind, causal_id, idempotency_key, attempt, intent_id,"
    " boundary, body AS body_text, prev_hash, entry_hash, recorded_at"
)


class PgJournalRepository(SqlRepository):
    async def append(
        self,
        *,
        tenant_id: TenantId,
        run_id: RunId,
        kind: str,
        causal_id: str,
        idempotency_key: IdempotencyKey,
        attempt: int | None,
        intent_id: str | None,
        boundary: str | None,
        body_text: str,
        recorded_at: datetime,
    ) -> JournalEntry:
        stamp = recorded_at.astimezone(UTC)
        try:
            row = await self._one(
                "SELECT out_position, out_prev_hash, out_entry_hash FROM arvis_journal_append("
                ":t, :r, :kind, :c, :k, :a, :i, :b, :body, :at)",
                t=tenant_id,
                r=run_id,
                kind=kind,
                c=causal_id,
                k=idempotency_key,
                a=attempt,
                i=intent_id,
                b=boundary,
                body=body_text,
                at=stamp.isoformat(timespec="microseconds"),
            )
        except DBAPIError as exc:
            if sqlstate_of(exc) == "AR001":
                raise JournalConflict(
                    f"attempt {attempt} of {idempotency_key[:12]}… already has another result"
                ) from exc
            raise
        assert row is not None
        return JournalEntry(
            tenant_id=tenant_id,
            run_id=run_id,
            position=row["out_position"],
            kind=kind,
            causal_id=causal_id,
            idempotency_key=idempotency_key,
            attempt=attempt,
            intent_id=intent_id,
            boundary=boundary,
            body_text=body_text,
            prev_hash=row["out_prev_hash"],
            entry_hash=row["out_entry_hash"],
            recorded_at=stamp,
        )

    async def for_attempt(
        self, tenant_id: TenantId, key: IdempotencyKey, attempt: int
    ) -> JournalEntry | None:
        row = await self._one(
            f"SELECT {_JOURNAL_COLUMNS} FROM journal_entries WHERE tenant_id = :t"
            " AND idempotency_key = :k AND attempt = :a",
            t=tenant_id,
            k=key,
            a=attempt,
        )
        return None if row is None else _entry(row)

    async def at(self, tenant_id: TenantId, run_id: RunId, position: int) -> JournalEntry | None:
        row = await self._one(
            f"SELECT {_JOURNAL_COLUMNS} FROM journal_entries WHERE tenant_id = :t"
            " AND run_id = :r AND position = :p",
            t=tenant_id,
            r=run_id,
            p=position,
        )
        return None if row is None else _entry(row)

    async def chain(
        self, run_id: RunId, tenant_id: TenantId, after: int, limit: int
    ) -> list[ChainRow]:
        # Verification reads many rows: straight from the driver, in this unit of
        # work's transaction, as plain tuples.
        raw = await self._c.get_raw_connection()
        driver: Any = raw.driver_connection
        async with driver.cursor() as cursor:
            await cursor.execute(
                "SELECT position, prev_hash, entry_hash, kind, causal_id, idempotency_key,"
                " attempt, intent_id, boundary, recorded_at, body FROM journal_entries"
                " WHERE tenant_id = %s AND run_id = %s AND position > %s"
                " ORDER BY position LIMIT %s",
                (tenant_id, run_id, after, limit),
            )
            rows: list[ChainRow] = await cursor.fetchall()
        return rows

    async def page(
        self, tenant_id: TenantId, run_id: RunId, after: int, limit: int
    ) -> list[JournalEntry]:
        rows = await self._all(
            f"SELECT {_JOURNAL_COLUMNS} FROM journal_entries WHERE tenant_id = :t"
            " AND run_id = :r AND position > :after ORDER BY position LIMIT :n",
            t=tenant_id,
            r=run_id,
            after=after,
            n=limit,
        )
        return [_entry(row) for row in rows]

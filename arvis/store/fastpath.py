"""The hot path of ``tool.execute`` on PostgreSQL: each step one prepared statement.

Admission of a first, already-authorized attempt is ``arvis_admit`` and the
journal transaction is ``arvis_journal_append`` asked to settle the attempt
(arvis/migrations/sql): each is one round trip and one commit, so a governed call
costs the two commits of DESIGN §2 and little else. Anything unusual answers
without writing and the lifecycle takes its general path. Connections come from a psycopg pool in
autocommit mode: a single statement is its own transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from arvis.domain.errors import StoreUnavailable
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.ports import FastAdmission, JournalEntry
from arvis.store.engine import libpq_url
from arvis.store.errors import translate_driver

# The two statements of a governed call (bench/floor.py times them alone too).
ADMIT_SQL = (
    "SELECT out_status, out_receipt_position, out_run_plan FROM arvis_admit("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
MARK_STARTED_SQL = (
    "UPDATE intents SET started_at = now() WHERE tenant_id = %s AND intent_id = %s"
    " AND started_at IS NULL AND settled_at IS NULL"
)
JOURNAL_SQL = (
    "SELECT out_position, out_prev_hash, out_entry_hash FROM arvis_journal_append("
    "%s, %s, 'execution', %s, %s, %s, %s, %s, %s, %s, true, %s, %s)"
)


@dataclass
class PgFastPath:
    pool: AsyncConnectionPool

    @classmethod
    async def open(cls, url: str, *, max_size: int = 10, timeout_s: float = 5.0) -> PgFastPath:
        pool = AsyncConnectionPool(
            libpq_url(url),
            min_size=1,
            max_size=max_size,
            # A request must not wait long for a connection during an outage.
            timeout=timeout_s,
            reconnect_timeout=timeout_s,
            kwargs={"autocommit": True, "prepare_threshold": 0, "connect_timeout": 5},
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StoreUnavailable("the database is unreachable") from exc
        return cls(pool)

    async def _fetch(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
        try:
            async with self.pool.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(sql, params)
                row = await cursor.fetchone()
        except PoolTimeout as exc:
            raise StoreUnavailable("no database connection became available") from exc
        except psycopg.Error as exc:
            if exc.sqlstate == "AR001":
                raise JournalConflict(str(exc.diag.message_primary)) from exc
            domain = translate_driver(exc)
            if isinstance(domain, StoreUnavailable):
                # Connections pooled before an outage are dead now: check them all
                # in the background so the next request gets a live one.
                asyncio.get_running_loop().create_task(self._check())
            if domain is not None:
                raise domain from exc
            raise
        assert row is not None
        return row

    async def mark_started(self, tenant_id: str, intent_id: str) -> None:
        """``intents.started_at``, in a statement (and a commit) of its own."""
        try:
            async with self.pool.connection() as conn:
                await conn.execute(MARK_STARTED_SQL, (tenant_id, intent_id))
        except PoolTimeout as exc:
            raise StoreUnavailable("no database connection became available") from exc
        except psycopg.Error as exc:
            domain = translate_driver(exc)
            if domain is not None:
                raise domain from exc
            raise

    async def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """One prepared read on the hot path's pool (e.g. an API key per request)."""
        try:
            async with self.pool.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(sql, params)
                return await cursor.fetchone()
        except PoolTimeout as exc:
            raise StoreUnavailable("no database connection became available") from exc
        except psycopg.Error as exc:
            domain = translate_driver(exc)
            if domain is not None:
                raise domain from exc
            raise

    async def _check(self) -> None:
        with contextlib.suppress(Exception):
            await self.pool.check()

    async def admit(
        self,
        *,
        tenant_id: str,
        run_id: str,
        plan_id: str,
        causal_id: str,
        idempotency_key: str,
        tool: str,
        payload_digest: str,
        capability_id: str,
        manager_id: str,
        intent_id: str,
        payload_text: str,
        commitment: str,
        context_json: str,
        instance_id: str,
    ) -> FastAdmission:
        status, position, run_plan = await self._fetch(
            ADMIT_SQL,
            (
                tenant_id,
                run_id,
                plan_id,
                causal_id,
                idempotency_key,
                tool,
                payload_digest,
                capability_id,
                manager_id,
                intent_id,
                payload_text,
                commitment,
                context_json,
                instance_id,
            ),
        )
        return FastAdmission(status=status, receipt_position=position, run_plan=run_plan)

    async def journal_execution(
        self,
        *,
        tenant_id: str,
        run_id: str,
        causal_id: str,
        idempotency_key: str,
        attempt: int,
        intent_id: str,
        boundary: str,
        body_text: str,
        recorded_at: datetime,
        retryable: bool,
        confirmation_id: str | None,
    ) -> JournalEntry:
        stamp = recorded_at.astimezone(UTC)
        position, prev_hash, entry_hash = await self._fetch(
            JOURNAL_SQL,
            (
                tenant_id,
                run_id,
                causal_id,
                idempotency_key,
                attempt,
                intent_id,
                boundary,
                body_text,
                stamp.isoformat(timespec="microseconds"),
                retryable,
                confirmation_id,
            ),
        )
        return JournalEntry(
            tenant_id=tenant_id,  # type: ignore[arg-type]
            run_id=run_id,  # type: ignore[arg-type]
            position=position,
            kind="execution",
            causal_id=causal_id,
            idempotency_key=idempotency_key,
            attempt=attempt,
            intent_id=intent_id,
            boundary=boundary,
            body_text=body_text,
            prev_hash=prev_hash,
            entry_hash=entry_hash,
            recorded_at=stamp,
        )

    async def close(self) -> None:
        await self.pool.close()

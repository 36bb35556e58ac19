"""The pool the store's statements run on: autocommit connections with prepared
statements, so a statement is its own transaction (one lifecycle step, one round trip,
one commit), and the driver's errors translated into the domain's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from arvis.domain.errors import StoreUnavailable
from arvis.store.engine import libpq_url
from arvis.store.errors import translate_driver
from arvis.store.reads import PgReads


class PgPool:
    """One pool of the lifecycle's connections, and the plumbing every step shares."""

    def __init__(self, pool: AsyncConnectionPool, fingerprint: str) -> None:
        self.pool = pool
        self.fingerprint = fingerprint
        """DESIGN §5: the database's system identifier plus the schema revision."""

    @classmethod
    async def open(
        cls, url: str, fingerprint: str, *, max_size: int = 10, timeout_s: float = 5.0
    ) -> Self:
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
        return cls(pool, fingerprint)

    async def close(self) -> None:
        await self.pool.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        try:
            async with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailable("no database connection became available") from exc
        except psycopg.Error as exc:
            domain = translate_driver(exc)
            if domain is None:
                raise
            if isinstance(domain, StoreUnavailable):
                # Connections pooled before an outage are dead now: check them all
                # in the background so the next request gets a live one.
                asyncio.get_running_loop().create_task(self._check())
            raise domain from exc

    async def _check(self) -> None:
        with contextlib.suppress(Exception):
            await self.pool.check()

    async def _row(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> tuple[Any, ...]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(sql, params)
            row = await cursor.fetchone()
        assert row is not None
        return row

    async def _batch(self, sql: str, tenant: str, items: Sequence[str]) -> list[tuple[Any, ...]]:
        """One batch statement (:mod:`arvis.store.batching`): its arguments are the
        tenant and the JSON array of ``items`` (each one JSON value already), its rows
        their answers."""
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(sql, (tenant, "[" + ",".join(items) + "]"))
            return await cursor.fetchall()

    async def _count(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, params)
            return cursor.rowcount

    async def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """One prepared read on this pool (e.g. an API key per request)."""
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(sql, params)
            return await cursor.fetchone()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[PgReads]:
        """One REPEATABLE READ, READ ONLY transaction: every read sees one snapshot."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgReads(conn)

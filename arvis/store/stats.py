"""What ``/readyz`` and ``/metrics`` ask of the database. One statement each, no
transaction held."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.store.connections import translated
from arvis.store.errors import StoreUnavailable


class PgStats:
    """The store's health and the counts the metrics show (over all tenants)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def ping(self) -> None:
        """Raise StoreUnavailable unless a trivial query answers."""
        try:
            await self._count("SELECT 1")
        except Exception as exc:
            raise StoreUnavailable("the database is unreachable") from exc

    async def audit_incomplete_runs(self) -> int:
        """How many runs are flagged audit-incomplete."""
        return await self._count("SELECT count(*) FROM runs WHERE audit_incomplete")

    async def evidence_broken_runs(self) -> int:
        """How many runs were found with broken evidence (issue 23)."""
        return await self._count("SELECT count(*) FROM runs WHERE evidence_broken_at IS NOT NULL")

    async def _count(self, statement: str) -> int:
        async with translated(self._engine, write=False) as conn:
            return int((await conn.execute(text(statement))).scalar_one())

"""Read-only counts for metrics. One statement, no transaction held."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.store.errors import translate


async def audit_incomplete_runs(engine: AsyncEngine) -> int:
    """How many runs, over all tenants, are flagged audit-incomplete."""
    return await _count(engine, "SELECT count(*) FROM runs WHERE audit_incomplete")


async def evidence_broken_runs(engine: AsyncEngine) -> int:
    """How many runs, over all tenants, were found with broken evidence (issue 23)."""
    return await _count(engine, "SELECT count(*) FROM runs WHERE evidence_broken_at IS NOT NULL")


async def _count(engine: AsyncEngine, statement: str) -> int:
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text(statement))
            return int(result.scalar_one())
    except Exception as exc:
        domain = translate(exc)
        if domain is not None:
            raise domain from exc
        raise

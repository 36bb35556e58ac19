"""Read-only counts for metrics. One statement, no transaction held."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.store.errors import translate


async def audit_incomplete_runs(engine: AsyncEngine) -> int:
    """How many runs, over all tenants, are flagged audit-incomplete."""
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text("SELECT count(*) FROM runs WHERE audit_incomplete"))
            return int(result.scalar_one())
    except Exception as exc:
        domain = translate(exc)
        if domain is not None:
            raise domain from exc
        raise

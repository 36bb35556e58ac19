"""One short transaction of administration on the SQLAlchemy engine, errors translated.

Keys, console sessions, plans, checkpoints, the notification outbox and the metrics'
counts are not steps of a governed effect: each of their statements is its own short
transaction here, beside the lifecycle's prepared-statement pool. Whatever the driver
raises leaves as the domain error ``arvis.store.errors`` maps it to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from arvis.store.errors import translate


@asynccontextmanager
async def transaction(engine: AsyncEngine, *, write: bool = True) -> AsyncIterator[AsyncConnection]:
    """A connection in a transaction that commits when the block ends (``write``), or
    one that only reads."""
    try:
        if write:
            async with engine.begin() as conn:
                yield conn
        else:
            async with engine.connect() as conn:
                yield conn
    except Exception as exc:
        domain = translate(exc)
        if domain is not None:
            raise domain from exc
        raise

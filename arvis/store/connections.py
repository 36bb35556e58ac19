"""One connection of an engine whose failures arrive as the lifecycle's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from arvis.store.errors import translate


@asynccontextmanager
async def translated(engine: AsyncEngine, *, write: bool) -> AsyncIterator[AsyncConnection]:
    """A connection of ``engine``, in a transaction that commits on exit when ``write``;
    a driver or SQLSTATE failure is raised as its :mod:`arvis.store.errors` domain error."""
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

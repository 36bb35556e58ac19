"""One connection of an engine whose failures arrive as the lifecycle's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import CursorResult, Executable
from sqlalchemy.engine import RowMapping
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


async def write(
    engine: AsyncEngine, statement: Executable, params: Mapping[str, Any]
) -> CursorResult[Any]:
    """Run one statement in a transaction of its own and commit it: the whole of a store
    write that is one statement (STYLE "one lifecycle step = one statement and one
    commit"), with its failure translated as :func:`translated` does."""
    async with translated(engine, write=True) as conn:
        return await conn.execute(statement, params)


async def rows(
    engine: AsyncEngine,
    statement: Executable,
    params: Mapping[str, Any],
    *,
    write: bool = False,
) -> Sequence[RowMapping]:
    """One statement's rows, by column name, from a connection of its own (a
    transaction that commits, with ``write``: a statement that changes what it
    answers), its failure translated as :func:`translated` does."""
    async with translated(engine, write=write) as conn:
        return (await conn.execute(statement, params)).mappings().all()

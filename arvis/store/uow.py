"""The unit of work: exactly one transaction, rolled back unless committed.

Only ``lifecycle`` opens units of work. Leaving the ``async with`` block
without ``commit()`` rolls back; a database exception leaves it as a domain
error from :mod:`arvis.store.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

from arvis.store.errors import SerializationConflict, StoreUnavailable, translate

T = TypeVar("T")


class PgUnitOfWork:
    """One PostgreSQL transaction on one pooled connection."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._connection: AsyncConnection | None = None
        self._transaction: AsyncTransaction | None = None
        self._committed = False

    @property
    def connection(self) -> AsyncConnection:
        if self._connection is None:
            raise RuntimeError("unit of work used outside its async with block")
        return self._connection

    async def __aenter__(self) -> Self:
        try:
            self._connection = await self._engine.connect()
            self._transaction = await self._connection.begin()
        except BaseException as exc:
            await self._close()
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise
        return self

    async def commit(self) -> None:
        assert self._transaction is not None
        try:
            await self._transaction.commit()
        except Exception as exc:
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise
        self._committed = True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if not self._committed and self._transaction is not None:
                try:
                    await self._transaction.rollback()
                except Exception:  # the connection is discarded below
                    if self._connection is not None:
                        await self._connection.invalidate()
        finally:
            await self._close()
        if exc is not None:
            domain = translate(exc)
            if domain is not None:
                raise domain from exc

    async def _close(self) -> None:
        if self._connection is not None:
            # Closing a connection that the server already dropped may fail.
            with contextlib.suppress(Exception):
                await self._connection.close()
            self._connection = None


async def retry_transaction(
    step: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    base_delay_s: float = 0.02,
    on: tuple[type[Exception], ...] = (StoreUnavailable, SerializationConflict),
) -> T:
    """Run a whole transactional step again on connection or serialization failures.

    The step must take its ids and timestamps from outside, so a retry repeats
    the same logical write.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await step()
        except on:
            if attempt == attempts:
                raise
            # Full jitter: spreads retries of many clients hitting one restart.
            await asyncio.sleep(random.uniform(0, base_delay_s * 2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover

"""The unit of work: exactly one transaction, rolled back unless committed.

Only ``lifecycle`` opens units of work. Leaving the ``async with`` block
without ``commit()`` rolls back; a database exception leaves it as a domain
error from :mod:`arvis.store.errors`.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Self

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

from arvis.store.confirmation_repo import PgConfirmationRepository
from arvis.store.errors import translate
from arvis.store.journal_repo import PgJournalRepository
from arvis.store.repositories import (
    PgActionRepository,
    PgCapabilityRepository,
    PgIntentRepository,
    PgLeaseRepository,
    PgRunRepository,
)


class PgUnitOfWork:
    """One PostgreSQL transaction on one pooled connection, with the lifecycle's
    repositories bound to it."""

    runs: PgRunRepository
    actions: PgActionRepository
    capabilities: PgCapabilityRepository
    intents: PgIntentRepository
    confirmations: PgConfirmationRepository
    journal: PgJournalRepository
    leases: PgLeaseRepository

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
        conn = self._connection
        self.runs = PgRunRepository(conn)
        self.actions = PgActionRepository(conn)
        self.capabilities = PgCapabilityRepository(conn)
        self.intents = PgIntentRepository(conn)
        self.confirmations = PgConfirmationRepository(conn)
        self.journal = PgJournalRepository(conn)
        self.leases = PgLeaseRepository(conn)
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

"""Which PostgreSQL to use, and the open store that the kernel holds."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.store.embedded import EmbeddedPostgres, start_embedded
from arvis.store.engine import create_async_store_engine, libpq_url
from arvis.store.errors import StoreUnavailable, translate
from arvis.store.migrate import check_revision, store_fingerprint
from arvis.store.operations import PgOperations

EMBEDDED_DATABASE = "arvis"


@dataclass(frozen=True)
class DatabaseTarget:
    """A resolved database URL and, when embedded, the server that serves it."""

    url: str
    embedded: EmbeddedPostgres | None = None


def resolve_database(
    database_url: str | None, data_dir: Path, *, stop_at_exit: bool = True
) -> DatabaseTarget:
    """``database_url`` when given, else the embedded server's ``arvis`` database."""
    if database_url:
        return DatabaseTarget(url=database_url)
    server = start_embedded(data_dir, stop_at_exit=stop_at_exit)
    ensure_database(server.url, EMBEDDED_DATABASE)
    url = make_url(server.url).set(database=EMBEDDED_DATABASE).render_as_string(False)
    return DatabaseTarget(url=url, embedded=server)


def ensure_database(server_url: str, name: str) -> None:
    """Create database ``name`` on the server unless it exists (idempotent, race-safe)."""
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            # Two processes may both see it missing; the loser's duplicate is fine.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(f'CREATE DATABASE "{name}"')


@dataclass
class PgStore:
    """The open store: an async engine on a database at this code's revision."""

    engine: AsyncEngine
    """SQLAlchemy, for administration: keys, plans, statistics."""
    revision: str
    fingerprint: str
    ops: PgOperations
    """The lifecycle's store (arvis.lifecycle.ports.LifecycleStore): its write steps and
    reads, each one prepared statement on a pool of its own."""
    _closed: bool = field(default=False, repr=False)

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 10) -> PgStore:
        """Connect and refuse a database that is not at this code's head revision."""
        engine = create_async_store_engine(url, pool_size=pool_size)
        try:
            async with engine.connect() as conn:
                revision = await conn.run_sync(check_revision)
                fingerprint = await conn.run_sync(store_fingerprint, revision)
        except BaseException as exc:
            await engine.dispose()
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise
        try:
            ops = await PgOperations.open(url, fingerprint, max_size=pool_size)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine=engine, revision=revision, fingerprint=fingerprint, ops=ops)

    async def ping(self) -> None:
        """Raise StoreUnavailable unless a trivial query answers."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            raise StoreUnavailable("the database is unreachable") from exc

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self.ops.close()
            await self.engine.dispose()

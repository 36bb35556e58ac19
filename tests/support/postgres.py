"""PostgreSQL for tests: one server per session, one fresh database per module.

The server is the coordinator of a Citus cluster of the session's own with
``ARVIS_TEST_CITUS=1`` (``make test-citus``; tests.support.citus creates each database on
every node), else ``ARVIS_TEST_DATABASE_URL`` when set (CI runs the suite once more
against the machine's PostgreSQL 15), else an embedded PostgreSQL in a temporary
directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from arvis.store.database import PgStore
from arvis.store.embedded import start_embedded
from arvis.store.engine import libpq_url
from arvis.store.migrate import distribute, upgrade
from tests.support import citus

# A fixture: pytest finds it in this plugin's namespace (pg_server_url asks for it by name).
from tests.support.citus import citus_cluster  # noqa: F401


@pytest.fixture(scope="session")
def pg_server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL of a PostgreSQL server on which tests may create databases."""
    if citus.SELECTED:
        yield request.getfixturevalue("citus_cluster").url
        return
    external = os.environ.get("ARVIS_TEST_DATABASE_URL")
    if external:
        yield external
        return
    # Not under pytest's basetemp: another pytest session of the same user resets
    # /tmp/pytest-of-<user> to mode 0700, which cuts an embedded server running as
    # its own system user off its data directory mid-run.
    home = Path(tempfile.mkdtemp(prefix="arvis-test-pg-"))
    home.chmod(0o755)
    server = start_embedded(home)
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def create_database(server_url: str, prefix: str = "arvis_t") -> str:
    """Create an empty database and return its URL."""
    cluster = citus.serving(server_url)
    if cluster is not None:
        return cluster.create_database(prefix)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def sql(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on ``url`` (autocommit) and answer its rows, if any: for reading
    what ARVIS wrote, or writing what a test tampers with."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


@asynccontextmanager
async def run_lock_held(url: str, tenant: str, run: str) -> AsyncIterator[None]:
    """The run's lock held by another transaction until the block ends: every step of
    the run waits meanwhile. The lock is the row lock on the run's row (revision 0015):
    a run that has no row yet gets one in this transaction, uncommitted, so a step that
    would create it waits on that insert; rolling back leaves the run as it was (a
    placeholder plan the row referred to stays in ``tool_plans``, bound to no run)."""
    conn = await psycopg.AsyncConnection.connect(libpq_url(url))
    try:
        # The row needs a plan to refer to, which may not be registered yet: one of the
        # holder's own, committed first, so the holder's transaction writes no plan (on
        # Citus every write of the reference table tool_plans waits for it otherwise).
        await conn.execute(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (repeat('f', 64), '{}')"
            " ON CONFLICT DO NOTHING"
        )
        await conn.commit()
        await conn.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, principal_id, journal_head)"
            " VALUES (%s, %s, repeat('f', 64), 'lock-holder', repeat('0', 64))"
            " ON CONFLICT DO NOTHING",
            (tenant, run),
        )
        await conn.execute(
            "SELECT 1 FROM runs WHERE tenant_id = %s AND run_id = %s FOR NO KEY UPDATE",
            (tenant, run),
        )
        yield
    finally:
        await conn.rollback()
        await conn.close()


def drop_database(server_url: str, url: str) -> None:
    cluster = citus.serving(server_url)
    if cluster is not None:
        cluster.drop_database(url)
        return
    name = make_url(url).database
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def empty_database_url(pg_server_url: str) -> Iterator[str]:
    """A database of this module's own, with no schema."""
    url = create_database(pg_server_url)
    try:
        yield url
    finally:
        drop_database(pg_server_url, url)


@pytest.fixture(scope="module")
def database_url(pg_server_url: str) -> Iterator[str]:
    """A database of this module's own, migrated to head (and distributed, on Citus)."""
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        if citus.serving(pg_server_url) is not None:
            distribute(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[PgStore]:
    opened = await PgStore.open(database_url)
    try:
        yield opened
    finally:
        await opened.close()

"""A Citus cluster for tests: a coordinator and two workers on loopback (issue 28).

Citus distributes tables over nodes by a column (ARVIS's per-tenant tables by
``tenant_id``, docs/scaling.md). The cluster is three private clusters of
:mod:`tests.support.pgcluster` (their directories are named like its outage clusters'),
from this machine's PostgreSQL 15 binaries, each with Citus (and pg_stat_statements)
in ``shared_preload_libraries``. Nothing here builds or installs Citus: when the
machine's PostgreSQL 15 has no Citus, :func:`citus_missing` says so and callers skip (or
fail, when ``ARVIS_TEST_CITUS=1`` asked for Citus).

A database Citus can distribute into exists on every node, with the extension in each,
and its coordinator knows the nodes: :meth:`CitusCluster.create_database` makes one.
``ARVIS_TEST_CITUS=1`` points the suite's ``pg_server_url`` (tests.support.postgres) at
the coordinator, so every fixture's database is such a database. :func:`function_calls`
tells how many calls of a function ran pushed down to a worker.

``python -m tests.support.citus`` says whether Citus is there (exit status 0) or why not
(1); ``make test-citus`` and ``.ci/run`` ask it first.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from arvis.store.engine import libpq_url
from tests.support.pgcluster import PG15_BIN, PrivateCluster, start_private_cluster

SELECTED = os.environ.get("ARVIS_TEST_CITUS") == "1"
"""The suite runs on Citus (``make test-citus``): every test database is on the cluster."""

WORKERS = 2
HOST = "127.0.0.1"

# Settings are SQL text (ALTER SYSTEM SET name = <text>). Every node, at start: Citus
# must come first in shared_preload_libraries, pg_stat_statements gives queries the ids
# citus_stat_statements counts by; multi-shard writes commit with two-phase commit on
# the workers; each database with the extension keeps a maintenance worker per node.
START_SETTINGS = {
    "shared_preload_libraries": "'citus', 'pg_stat_statements'",
    "max_prepared_transactions": "200",
    "max_worker_processes": "32",
}
# Every node, once Citus is loaded (its settings are unknown before). The nodes talk to
# each other without TLS (Citus asks for it by default): on loopback with trust auth it
# protects nothing, and a node started from a root session keeps root's HOME, where
# libpq may not read ~/.postgresql for a client certificate. track_functions counts the
# calls of each plpgsql function on the node that ran it (pg_stat_user_functions, for a
# person looking; its counts reach the view up to seconds late).
NODE_SETTINGS = {"citus.node_conninfo": "'sslmode=disable'", "track_functions": "'pl'"}
# The coordinator only: 4 shards per distributed table (2 per worker) instead of 32, so
# distributing a test database takes a fraction of the time (routing is the same); and
# citus_stat_statements, which counts the statements Citus's executor ran, by executor:
# a function call it counts was pushed down to the node of its distribution argument
# (see function_calls).
COORDINATOR_SETTINGS = {"citus.shard_count": "4", "citus.stat_statements_track": "'all'"}


def _pg_config(flag: str) -> Path | None:
    try:
        done = subprocess.run(
            [str(PG15_BIN / "pg_config"), flag],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(done.stdout.strip())


def citus_missing() -> str | None:
    """Why a Citus cluster cannot be started on this machine, or None when it can."""
    if not (PG15_BIN / "postgres").is_file():
        return f"no PostgreSQL 15 binaries in {PG15_BIN}"
    libdir, sharedir = _pg_config("--pkglibdir"), _pg_config("--sharedir")
    if libdir is None or sharedir is None:
        return f"{PG15_BIN / 'pg_config'} did not answer"
    for needed in (libdir / "citus.so", sharedir / "extension" / "citus.control"):
        if not needed.is_file():
            return f"Citus is not installed for PostgreSQL 15: no {needed}"
    return None


@dataclass
class CitusCluster:
    """A coordinator and its workers, each a private cluster with trust auth on loopback."""

    coordinator: PrivateCluster
    workers: tuple[PrivateCluster, ...]

    @property
    def url(self) -> str:
        """The coordinator's ``postgres`` database: where test databases are created."""
        return self.coordinator.url

    @property
    def nodes(self) -> tuple[PrivateCluster, ...]:
        return (self.coordinator, *self.workers)

    def serves(self, url: str) -> bool:
        """Whether ``url`` names a database on this cluster's coordinator."""
        parsed = make_url(url)
        return parsed.host == HOST and parsed.port == self.coordinator.port

    def node_url(self, node: PrivateCluster, database: str) -> str:
        return make_url(node.url).set(database=database).render_as_string(hide_password=False)

    def create_database(self, prefix: str = "arvis_t") -> str:
        """Create a database the way Citus needs one to distribute into, and return the
        coordinator's URL of it: the same name on every node, the extension in each, the
        coordinator registered as itself and every worker added."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        for node in self.nodes:
            with psycopg.connect(libpq_url(node.url), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(libpq_url(self.node_url(node, name)), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        url = self.node_url(self.coordinator, name)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (HOST, self.coordinator.port))
            for worker in self.workers:
                conn.execute("SELECT citus_add_node(%s, %s)", (HOST, worker.port))
            # For function_calls; created after the nodes, so Citus creates it on each.
            conn.execute("CREATE EXTENSION pg_stat_statements")
        return url

    def drop_database(self, url: str) -> None:
        """Drop the database ``url`` names on every node (the coordinator first: its
        connections to the workers' copies close with it)."""
        name = make_url(url).database
        for node in self.nodes:
            with psycopg.connect(libpq_url(node.url), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop every node and remove its data directory."""
        if self in _RUNNING:
            _RUNNING.remove(self)
        for node in self.nodes:
            node.destroy()


_RUNNING: list[CitusCluster] = []


@dataclass(frozen=True)
class Calls:
    """How often a function was called by statements sent to the coordinator, and how
    many of those calls Citus pushed down to the worker of the call's distribution
    argument (instead of running the function on the coordinator)."""

    total: int
    pushed_down: int


# A statement whose top-level plan is Citus's executor counts in citus_stat_statements;
# a call of a distributed function counts there only when it was delegated (a call run
# on the coordinator is a plain Function Scan). Both views count at the end of each
# statement, so the answer is exact at once. A call is a SELECT or CALL that names the
# function unquoted (not CREATE FUNCTION, nor create_distributed_function('name(…)')).
_CALLS_SQL = """
    SELECT f.name,
           (SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s
             WHERE s.dbid = d.oid AND s.query ~ f.pattern)::bigint,
           (SELECT coalesce(sum(c.calls), 0) FROM citus_stat_statements c
             WHERE c.dbid = d.oid AND c.executor = 'adaptive' AND c.query ~ f.pattern)::bigint
      FROM (SELECT name, '^\\s*(SELECT|CALL)\\M.*[^''\\w]' || name || '\\(' AS pattern
              FROM unnest(%s::text[]) AS name) f,
           pg_database d
     WHERE d.datname = current_database()"""


def function_calls(url: str, names: list[str]) -> dict[str, Calls]:
    """The calls of each function in ``names`` that the coordinator of ``url`` was sent
    since the database was created, and how many were pushed down."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        rows = conn.execute(_CALLS_SQL, (names,)).fetchall()
    return {name: Calls(total=total, pushed_down=down) for name, total, down in rows}


def worker_of(url: str, tenant: str) -> int:
    """The port of the worker that holds ``tenant``'s shard group in the distributed
    database ``url``."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT nodeport FROM citus_shards WHERE table_name = 'runs'::regclass"
            " AND shardid = get_shard_id_for_distribution_column('runs', %s::text)",
            (tenant,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def tenant_elsewhere(url: str, tenant: str, prefix: str = "tenant") -> str:
    """A tenant named ``<prefix>-<n>`` whose rows Citus places on another worker than
    ``tenant``'s."""
    home = worker_of(url, tenant)
    return next(t for t in (f"{prefix}-{n}" for n in range(100)) if worker_of(url, t) != home)


def serving(url: str) -> CitusCluster | None:
    """The running cluster whose coordinator ``url`` names, if any (tests.support.postgres
    creates and drops databases through it)."""
    return next((cluster for cluster in _RUNNING if cluster.serves(url)), None)


def _alter_system(node: PrivateCluster, settings: dict[str, str]) -> None:
    with psycopg.connect(libpq_url(node.url), autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(f"ALTER SYSTEM SET {name} = {value}")
        conn.execute("SELECT pg_reload_conf()")


def _start_node(settings: dict[str, str]) -> PrivateCluster:
    node = start_private_cluster(PG15_BIN)
    try:
        # shared_preload_libraries takes effect at start only: set, then restart.
        _alter_system(node, START_SETTINGS)
        node.stop()
        node.start()
        _alter_system(node, settings)
    except BaseException:
        node.destroy()
        raise
    return node


def start_citus_cluster(workers: int = WORKERS) -> CitusCluster:
    """Start a coordinator and ``workers`` workers (in parallel: each is an initdb and two
    starts). Call :func:`citus_missing` first."""
    wanted = [NODE_SETTINGS | COORDINATOR_SETTINGS] + [NODE_SETTINGS] * workers
    with ThreadPoolExecutor(len(wanted)) as pool:
        futures = [pool.submit(_start_node, settings) for settings in wanted]
    started = [future.result() for future in futures if future.exception() is None]
    if len(started) < len(wanted):
        for node in started:
            node.destroy()
        raise next(exc for f in futures if (exc := f.exception()) is not None)
    cluster = CitusCluster(coordinator=started[0], workers=tuple(started[1:]))
    _RUNNING.append(cluster)
    return cluster


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[CitusCluster]:
    """The session's Citus cluster, started on first use; skipped where Citus is not
    installed, failed if ``ARVIS_TEST_CITUS=1`` asked for it."""
    missing = citus_missing()
    if missing is not None:
        if SELECTED:
            pytest.fail(f"ARVIS_TEST_CITUS=1, but {missing}", pytrace=False)
        pytest.skip(missing)
    cluster = start_citus_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def citus_database(cluster: CitusCluster, prefix: str = "arvis_c") -> Iterator[str]:
    """A database of :meth:`CitusCluster.create_database`, dropped afterwards."""
    url = cluster.create_database(prefix)
    try:
        yield url
    finally:
        cluster.drop_database(url)


if __name__ == "__main__":
    reason = citus_missing()
    if reason is not None:
        print(reason)
        sys.exit(1)
    print(f"Citus is installed for PostgreSQL 15 ({PG15_BIN})")

"""The Citus test cluster (issue 28): a coordinator and two workers on loopback.

What the Citus tier stands on: each test database exists on every node with the
extension, the coordinator knows its workers, distributed tables spread over them,
ARVIS's schema migrates onto the coordinator, and a test can tell a function call pushed
down to a worker from one run on the coordinator. Migrated without ``--distribute``,
ARVIS's schema stays plain tables of the coordinator (test_distribution.py distributes it).

Skipped where this machine's PostgreSQL 15 has no Citus; ``make test-citus`` runs it.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from arvis.store.engine import libpq_url
from arvis.store.migrate import upgrade
from tests.support import citus
from tests.support.citus import Calls, CitusCluster, citus_database, function_calls
from tests.support.pgcluster import PrivateCluster
from tests.support.postgres import sql

pytestmark = [pytest.mark.db, pytest.mark.citus]


@pytest.fixture(scope="module")
def database(citus_cluster: CitusCluster) -> Iterator[str]:
    with citus_database(citus_cluster) as url:
        yield url


def _on(cluster: CitusCluster, node: PrivateCluster, url: str) -> str:
    return cluster.node_url(node, str(make_url(url).database))


def test_the_coordinator_knows_itself_and_both_workers(
    citus_cluster: CitusCluster, database: str
) -> None:
    nodes = sql(
        database,
        "SELECT nodeport, groupid = 0, isactive, shouldhaveshards FROM pg_dist_node"
        " WHERE nodename = %s ORDER BY groupid",
        citus.HOST,
    )
    assert nodes == [
        (citus_cluster.coordinator.port, True, True, False),
        *[(worker.port, False, True, True) for worker in citus_cluster.workers],
    ]
    active = sql(database, "SELECT node_port FROM citus_get_active_worker_nodes()")
    assert sorted(port for (port,) in active) == sorted(w.port for w in citus_cluster.workers)


def test_every_node_has_the_database_with_the_extension(
    citus_cluster: CitusCluster, database: str
) -> None:
    for node in citus_cluster.nodes:
        installed = sql(
            _on(citus_cluster, node, database),
            "SELECT extname FROM pg_extension WHERE extname IN ('citus', 'pg_stat_statements')"
            " ORDER BY 1",
        )
        assert installed == [("citus",), ("pg_stat_statements",)], node.port


def test_a_distributed_table_keeps_its_shards_on_the_workers(
    citus_cluster: CitusCluster, database: str
) -> None:
    sql(database, "CREATE TABLE spread (tenant_id text PRIMARY KEY, n integer NOT NULL)")
    sql(database, "SELECT create_distributed_table('spread', 'tenant_id')")
    sql(database, "INSERT INTO spread SELECT 'tenant-' || i, 0 FROM generate_series(1, 20) i")

    placed = sql(
        database,
        "SELECT nodeport, count(*) FROM citus_shards WHERE table_name = 'spread'::regclass"
        " GROUP BY nodeport ORDER BY nodeport",
    )
    assert placed == sorted((worker.port, 2) for worker in citus_cluster.workers)
    # Each worker holds some tenants' rows, and together every row.
    held = [
        sql(
            database,
            "SELECT sum(result::bigint) FROM run_command_on_placements('spread',"
            " 'SELECT count(*) FROM %%s') WHERE nodeport = %s",
            worker.port,
        )[0][0]
        for worker in citus_cluster.workers
    ]
    assert all(count > 0 for count in held)
    assert sum(held) == 20


def test_a_pushed_down_call_is_told_from_one_run_on_the_coordinator(database: str) -> None:
    sql(database, "CREATE TABLE counted (tenant_id text PRIMARY KEY, n integer NOT NULL)")
    sql(database, "SELECT create_distributed_table('counted', 'tenant_id')")
    sql(database, "INSERT INTO counted VALUES ('acme', 0)")
    sql(
        database,
        "CREATE FUNCTION count_up(p_tenant text) RETURNS integer LANGUAGE plpgsql AS $$"
        " DECLARE v integer; BEGIN"
        " UPDATE counted SET n = n + 1 WHERE tenant_id = p_tenant RETURNING n INTO v;"
        " RETURN v; END $$",
    )
    sql(
        database,
        "SELECT create_distributed_function('count_up(text)', 'p_tenant',"
        " colocate_with => 'counted')",
    )
    # As ARVIS sends its steps: prepared statements, each its own transaction.
    with psycopg.connect(libpq_url(database), autocommit=True, prepare_threshold=0) as conn:
        for _ in range(3):
            conn.execute("SELECT count_up(%s)", ("acme",))
        # Citus never pushes a call down inside BEGIN … COMMIT.
        with conn.transaction():
            conn.execute("SELECT count_up(%s)", ("acme",))
            conn.execute("SELECT count_up(%s)", ("acme",))

    assert function_calls(database, ["count_up"]) == {"count_up": Calls(total=5, pushed_down=3)}
    assert sql(database, "SELECT n FROM counted") == [(5,)]


@pytest.fixture(scope="module")
def migrated(citus_cluster: CitusCluster) -> Iterator[str]:
    with citus_database(citus_cluster, prefix="arvis_cm") as url:
        upgrade(url)
        yield url


def test_arvis_migrates_onto_the_coordinator_as_plain_tables(
    citus_cluster: CitusCluster, migrated: str
) -> None:
    assert sql(migrated, "SELECT to_regclass('runs') IS NOT NULL") == [(True,)]
    assert sql(migrated, "SELECT count(*) FROM citus_tables") == [(0,)]
    for worker in citus_cluster.workers:
        assert sql(_on(citus_cluster, worker, migrated), "SELECT to_regclass('runs')") == [(None,)]


@pytest.mark.skipif(not citus.SELECTED, reason="runs under ARVIS_TEST_CITUS=1 (make test-citus)")
def test_the_suites_databases_are_on_the_cluster_when_citus_is_selected(
    pg_server_url: str, citus_cluster: CitusCluster, database_url: str
) -> None:
    assert citus.serving(pg_server_url) is citus_cluster
    assert sql(database_url, "SELECT count(*) FROM pg_dist_node") == [(3,)]

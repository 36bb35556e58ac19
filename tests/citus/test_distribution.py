"""ARVIS's schema sharded by tenant on Citus, and its steps run on the workers (issue 28).

``arvis migrate --distribute`` places every tenant table by ``tenant_id`` colocated with
``runs``, the global tables as reference tables and the steps by their tenant argument;
it is idempotent, and a table a later revision adds is placed by the same rule at the
next migration. Governed calls then run pushed down to the tenant's worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from arvis.domain.ids import ConfirmationId, TenantId
from arvis.store.distribution import STEPS, distribute_schema
from arvis.store.engine import create_sync_engine
from arvis.store.migrate import distribute, downgrade, head_revision, upgrade
from arvis.store.posted import PgPostedMessages
from tests.support.citus import CitusCluster, citus_database, function_calls, tenant_elsewhere
from tests.support.lifecycle import AGENT, Harness, make_harness
from tests.support.postgres import sql

pytestmark = [pytest.mark.db, pytest.mark.citus]

TENANT_TABLES = {
    "runs",
    "decisions",
    "attempts",
    "confirmations",
    "confirmation_approvals",
    "journal_entries",
    "resolutions",
    "notify_outbox",
    "budget_usage",
    "run_checkpoints",
    "console_sessions",
    "slack_messages",
}
GLOBAL_TABLES = {"tool_plans", "instance_leases", "api_keys"}


def _arvis(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARVIS_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "arvis", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def distributed(citus_cluster: CitusCluster) -> Iterator[str]:
    with citus_database(citus_cluster, prefix="arvis_cd") as url:
        first = _arvis("migrate", "--distribute", url=url)
        assert first.returncode == 0, first.stderr
        assert f"to revision {head_revision()}" in first.stdout
        assert "distributed on Citus: placed" in first.stdout
        yield url


def test_migrate_distribute_again_places_nothing(distributed: str) -> None:
    again = _arvis("migrate", "--distribute", url=distributed)
    assert again.returncode == 0, again.stderr
    assert "already at revision" in again.stdout
    assert "already distributed on Citus; nothing to do" in again.stdout
    assert distribute(distributed) == ()


def test_tenant_tables_are_colocated_with_runs_and_global_ones_are_reference_tables(
    citus_cluster: CitusCluster, distributed: str
) -> None:
    placed = dict(
        sql(
            distributed,
            "SELECT table_name::text, citus_table_type || ':' || coalesce(distribution_column, '')"
            " || ':' || colocation_id::text FROM citus_tables",
        )
    )
    [(anchor,)] = sql(
        distributed,
        "SELECT colocation_id::text FROM citus_tables WHERE table_name = 'runs'::regclass",
    )
    assert placed == {
        **{table: f"distributed:tenant_id:{anchor}" for table in TENANT_TABLES},
        **{table: placed[table] for table in GLOBAL_TABLES},
    }
    assert all(placed[table].startswith("reference:") for table in GLOBAL_TABLES)
    # The schema's revision stays the coordinator's own.
    assert sql(
        distributed,
        "SELECT count(*) FROM citus_tables WHERE table_name = 'alembic_version'::regclass",
    ) == [(0,)]
    # Shards of the tenant tables are on the workers, none on the coordinator.
    ports = {
        port
        for (port,) in sql(
            distributed,
            "SELECT DISTINCT nodeport FROM citus_shards WHERE citus_table_type = 'distributed'",
        )
    }
    assert ports == {worker.port for worker in citus_cluster.workers}


def test_the_steps_are_distributed_by_their_tenant_colocated_with_runs(distributed: str) -> None:
    rows = sql(
        distributed,
        "SELECT p.proname, o.distribution_argument_index,"
        " o.colocationid = (SELECT colocationid FROM pg_dist_partition"
        "                    WHERE logicalrelid = 'runs'::regclass)"
        " FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid"
        " WHERE o.classid = 'pg_proc'::regclass AND p.proname = ANY (%s)",
        list(STEPS),
    )
    assert sorted(rows) == sorted((step, 0, True) for step in STEPS)


def test_a_table_a_later_revision_adds_is_placed_at_the_next_migration(distributed: str) -> None:
    sql(
        distributed,
        "CREATE TABLE later_notes (tenant_id text NOT NULL, note_id text NOT NULL,"
        " PRIMARY KEY (tenant_id, note_id))",
    )
    sql(distributed, "CREATE TABLE later_settings (name text PRIMARY KEY, value text)")
    try:
        upgrade(distributed)  # at head already: it places what is new
        kinds = dict(
            sql(
                distributed,
                "SELECT table_name::text, citus_table_type FROM citus_tables"
                " WHERE table_name::text LIKE 'later_%%'",
            )
        )
        assert kinds == {"later_notes": "distributed", "later_settings": "reference"}
    finally:
        sql(distributed, "DROP TABLE later_notes, later_settings")


async def test_governed_calls_of_two_tenants_run_on_their_workers(distributed: str) -> None:
    harness = await make_harness(distributed)
    try:
        await _calls_of_two_tenants(harness, distributed)
    finally:
        await harness.close()


async def _calls_of_two_tenants(harness: Harness, distributed: str) -> None:
    other = tenant_elsewhere(distributed, AGENT.tenant_id)
    agents = [AGENT, AGENT.model_copy(update={"tenant_id": TenantId(other)})]
    before = function_calls(distributed, ["arvis_admit_batch", "arvis_journal_batch"])
    for n in range(6):
        identity = agents[n % 2]
        result = await harness.execute(
            "read", {"n": n}, run_id=f"r-{identity.tenant_id}", identity=identity
        )
        assert result.outcome == "executed"
    after = function_calls(distributed, ["arvis_admit_batch", "arvis_journal_batch"])
    for step in ("arvis_admit_batch", "arvis_journal_batch"):
        total = after[step].total - before[step].total
        down = after[step].pushed_down - before[step].pushed_down
        assert (total, down) == (6, 6), step
    for identity in agents:
        rows = sql(
            distributed,
            "SELECT count(*) FROM journal_entries WHERE tenant_id = %s",
            identity.tenant_id,
        )
        assert rows == [(3,)]


async def test_a_database_distributed_at_0017_migrates_to_0018_and_places_its_table(
    citus_cluster: CitusCluster,
) -> None:
    # Revision 0018 adds a column to a distributed table, replaces a distributed step
    # and creates slack_messages, which the same migration then places; its downgrade
    # undoes all three on the cluster.
    with citus_database(citus_cluster, prefix="arvis_c18") as url:
        upgrade(url, "0017")
        engine = create_sync_engine(url)
        try:
            with engine.connect() as conn:
                assert "confirmations" in distribute_schema(conn)
        finally:
            engine.dispose()
        upgrade(url)
        kinds = dict(
            sql(
                url,
                "SELECT table_name::text, citus_table_type FROM citus_tables"
                " WHERE table_name::text IN ('slack_messages', 'confirmations')",
            )
        )
        assert kinds == {"slack_messages": "distributed", "confirmations": "distributed"}
        harness = await make_harness(url)
        try:
            asked = await harness.execute("append")
            assert asked.confirmation is not None
            posted = PgPostedMessages(harness.store.engine)
            confirmation = ConfirmationId(asked.confirmation.id)
            await posted.begin(AGENT.tenant_id, confirmation, 1, "C0APPROVALS")
            await posted.posted(AGENT.tenant_id, confirmation, 1, "1796000000.000001")
            found = await posted.find(AGENT.tenant_id, confirmation)
            record = await harness.lifecycle.consent.confirmation(AGENT.tenant_id, confirmation)
        finally:
            await harness.close()
        assert record.policy is not None
        assert record.policy.policy_ids == ("default.consent_for_mutating_unsafe",)
        assert found is not None
        assert found.ts == "1796000000.000001"
        downgrade(url, "0017")  # and back: the table goes, and is placed again
        assert sql(url, "SELECT to_regclass('slack_messages')") == [(None,)]
        upgrade(url)
        assert sql(
            url,
            "SELECT citus_table_type FROM citus_tables WHERE table_name::text = 'slack_messages'",
        ) == [("distributed",)]

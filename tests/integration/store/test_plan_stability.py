"""Hot-path lookups use the primary key even on a new, never-analyzed database.

A pooled connection caches generic plans for its whole life (the functions'
statements and every foreign-key check). Planned while the tables are small,
such a plan once picked a secondary index that also began with ``tenant_id``
and filtered the tenant's every row: admission slowed linearly with the row
count (migration 0002). These are the statements the hot path runs, planned
generically on a small table, as PostgreSQL plans them there.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from arvis.store.engine import libpq_url
from arvis.store.migrate import upgrade
from tests.support.postgres import create_database, drop_database

PLAN = "p" * 64

# (indexes the plan may look the row up in, statement with two text parameters): the
# lookups of arvis_admit, arvis_journal and arvis_bind (arvis/store/sql/).
LOOKUPS = [
    pytest.param(
        "pk_runs",
        "SELECT plan_id FROM runs WHERE tenant_id = $1 AND run_id = $2",
        id="runs-bound-plan",
    ),
    pytest.param(
        "pk_decisions",
        "SELECT idempotency_key FROM decisions WHERE tenant_id = $1 AND run_id = $2"
        " AND causal_id = 'c1'",
        id="decisions-bound-key",
    ),
    pytest.param(
        "pk_decisions",
        "SELECT 1 FROM ONLY decisions x WHERE tenant_id = $1 AND run_id = $2"
        " AND causal_id = 'c1' FOR KEY SHARE OF x",
        id="decisions-foreign-key-check",
    ),
    pytest.param(
        "pk_attempts",
        "SELECT 1 FROM attempts WHERE tenant_id = $1 AND idempotency_key = $2",
        id="attempts-in-flight",
    ),
    pytest.param(
        "pk_attempts",
        "DELETE FROM attempts WHERE tenant_id = $1 AND idempotency_key = $2 AND attempt = 1",
        id="attempts-settle",
    ),
    pytest.param(
        "uq_journal_entries_one_result_per_attempt",
        "SELECT max(attempt) FROM journal_entries WHERE idempotency_key = $2"
        " AND tenant_id = $1 AND attempt IS NOT NULL",
        id="journal-latest-attempt",
    ),
    pytest.param(
        "uq_confirmations_idempotency_key_tenant_id",
        "SELECT confirmation_id FROM confirmations WHERE idempotency_key = $2 AND tenant_id = $1",
        id="confirmations-of-a-key",
    ),
    pytest.param(
        "pk_confirmations ix_confirmations_tenant_id_state_confirmation_id",
        "UPDATE confirmations SET state = 'CONSUMED' WHERE tenant_id = $1"
        " AND confirmation_id = $2 AND state = ANY('{RESERVED}')",
        id="confirmations-settle",
    ),
    pytest.param(
        "pk_journal_entries",
        "SELECT position FROM journal_entries WHERE tenant_id = $1 AND run_id = $2"
        " AND position > 0 ORDER BY position LIMIT 100",
        id="journal-read",
    ),
]


@pytest.fixture(scope="module", params=["never analyzed", "analyzed"])
def conn(request: pytest.FixtureRequest, pg_server_url: str) -> Iterator[psycopg.Connection]:
    """A few thousand rows of one tenant in every lifecycle table, as they are under
    load; planned before any statistics exist, and again after ANALYZE."""
    url = create_database(pg_server_url)
    upgrade(url)
    try:
        with psycopg.connect(libpq_url(url), autocommit=True) as connection:
            _seed(connection)
            if request.param == "analyzed":
                connection.execute("ANALYZE")
            connection.execute("SET plan_cache_mode = force_generic_plan")
            yield connection
    finally:
        drop_database(pg_server_url, url)


def _seed(connection: psycopg.Connection) -> None:
    connection.execute("INSERT INTO tool_plans VALUES (%s, '[]')", (PLAN,))
    connection.execute(
        "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head)"
        " SELECT 't', 'r' || g, %s, '' FROM generate_series(0, 3999) g",
        (PLAN,),
    )
    connection.execute(
        "INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,"
        " payload_digest, payload)"
        " SELECT 't', 'r' || g / 10, 'c' || g, 'k' || g, 'echo', 'd', '{}'"
        " FROM generate_series(0, 3999) g"
    )
    # Under load, a few hundred attempts are in flight at once (a settled one's row is gone).
    connection.execute(
        "INSERT INTO attempts (tenant_id, idempotency_key, attempt, run_id, causal_id, tool,"
        " plan_id, intent_id, capability_id, commitment, receipt_position, context, owner)"
        " SELECT 't', 'k' || g, 1, 'r' || g / 10, 'c' || g, 'echo', %s, 'int' || g,"
        " 'cap' || g, 'c', 1, '{}', 'i/1' FROM generate_series(0, 1999) g",
        (PLAN,),
    )
    connection.execute(
        "INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,"
        " idempotency_key, attempt, intent_id, boundary, body, prev_hash, entry_hash,"
        " recorded_at) SELECT 't', 'r' || g / 10, g % 10 + 1, 'execution', 'c' || g,"
        " 'k' || g, 1, 'int' || g, 'EFFECT_COMPLETED', '{}', 'p', 'e', now()"
        " FROM generate_series(2000, 3999) g"
    )
    connection.execute(
        "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
        " idempotency_key, tool, payload_digest, payload, state, context, expires_at)"
        " SELECT 't', 'cnf' || g, 'r' || g / 10, 'c' || g, 'k' || g, 'echo', 'd', '{}',"
        " CASE WHEN g = 0 THEN 'RESERVED' ELSE 'CONSUMED' END, '{}', now()"
        " FROM generate_series(0, 3999) g"
    )


@pytest.mark.parametrize(("index", "statement"), LOOKUPS)
def test_generic_plan_looks_the_row_up_by_its_id(
    conn: psycopg.Connection, index: str, statement: str
) -> None:
    conn.execute(f"PREPARE lookup(text, text) AS {statement}")
    try:
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN EXECUTE lookup('t', 'x')"))
    finally:
        conn.execute("DEALLOCATE lookup")
    assert any(
        f" using {name} " in plan or f"Index Scan on {name} " in plan for name in index.split()
    ), plan

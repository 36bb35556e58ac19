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

# (indexes the plan may look the row up in, statement with two text parameters)
LOOKUPS = [
    pytest.param(
        "pk_actions",
        "SELECT 1 FROM ONLY actions x WHERE tenant_id = $1 AND idempotency_key = $2"
        " FOR KEY SHARE OF x",
        id="actions-foreign-key-check",
    ),
    pytest.param(
        "pk_actions",
        "UPDATE actions SET in_flight = false WHERE tenant_id = $1 AND idempotency_key = $2"
        " AND attempts = 1",
        id="actions-settle",
    ),
    pytest.param(
        "pk_capabilities",
        "SELECT 1 FROM ONLY capabilities x WHERE tenant_id = $1 AND capability_id = $2"
        " FOR KEY SHARE OF x",
        id="capabilities-foreign-key-check",
    ),
    pytest.param(
        "pk_capabilities",
        "UPDATE capabilities SET state = 'CONSUMED' WHERE tenant_id = $1"
        " AND capability_id = $2 AND state = 'ACTIVE'",
        id="capabilities-consume",
    ),
    pytest.param(
        "pk_intents",
        "UPDATE intents SET settled = true, settled_at = now() WHERE tenant_id = $1"
        " AND intent_id = $2 AND settled_at IS NULL",
        id="intents-settle",
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
    """A few hundred rows of one tenant in every lifecycle table, settled as they are
    after use; planned before any statistics exist, and again after ANALYZE (which
    says that almost no intent is unsettled, so a partial index on unsettled intents
    looks almost empty)."""
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
        " SELECT 't', 'r' || g / 10, %s, '' FROM generate_series(0, 399, 10) g",
        (PLAN,),
    )
    connection.execute(
        "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool,"
        " payload_digest, attempts, in_flight)"
        " SELECT 't', 'k' || g, 'r' || g / 10, 'c' || g, 'echo', 'd', 1, false"
        " FROM generate_series(0, 399) g"
    )
    connection.execute(
        "INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key,"
        " attempt, manager_id, state, receipt_position)"
        " SELECT 't', 'cap' || g, 'r' || g / 10, 'k' || g, 1, 'm', 'CONSUMED', g"
        " FROM generate_series(0, 399) g"
    )
    connection.execute(
        "INSERT INTO intents (tenant_id, intent_id, run_id, causal_id, idempotency_key,"
        " attempt, tool, plan_id, payload, payload_digest, capability_id, commitment,"
        " receipt_position, context, instance_id, settled, boundary, settled_at)"
        " SELECT 't', 'int' || g, 'r' || g / 10, 'c' || g, 'k' || g, 1, 'echo', %s, '{}',"
        " 'd', 'cap' || g, 'c', g, '{}', 'i', g > 0,"
        " CASE WHEN g > 0 THEN 'EFFECT_COMPLETED' END, CASE WHEN g > 0 THEN now() END"
        " FROM generate_series(0, 399) g",
        (PLAN,),
    )
    connection.execute(
        "INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,"
        " idempotency_key, attempt, intent_id, boundary, body, prev_hash, entry_hash,"
        " recorded_at) SELECT 't', 'r' || g / 10, g % 10 + 1, 'execution', 'c' || g,"
        " 'k' || g, 1, 'int' || g, 'EFFECT_COMPLETED', '{}', 'p', 'e', now()"
        " FROM generate_series(0, 399) g"
    )
    connection.execute(
        "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
        " idempotency_key, tool, payload_digest, payload, state, context, expires_at)"
        " SELECT 't', 'cnf' || g, 'r' || g / 10, 'c' || g, 'k' || g, 'echo', 'd', '{}',"
        " CASE WHEN g = 0 THEN 'RESERVED' ELSE 'CONSUMED' END, '{}', now()"
        " FROM generate_series(0, 399) g"
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

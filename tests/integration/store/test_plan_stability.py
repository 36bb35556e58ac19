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

PLAN = "p" * 64

# (primary key the plan must use, statement with two text parameters)
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
        " AND intent_id = $2 AND NOT settled",
        id="intents-settle",
    ),
    pytest.param(
        "pk_confirmations",
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


@pytest.fixture(scope="module")
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    """A few hundred rows of one tenant in every lifecycle table, never analyzed."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as connection:
        connection.execute("INSERT INTO tool_plans VALUES (%s, '[]')", (PLAN,))
        connection.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head)"
            " SELECT 't', 'r' || g / 100, %s, '' FROM generate_series(0, 399, 100) g",
            (PLAN,),
        )
        connection.execute(
            "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool,"
            " payload_digest, attempts, in_flight)"
            " SELECT 't', 'k' || g, 'r' || g / 100, 'c' || g, 'echo', 'd', 1, false"
            " FROM generate_series(0, 399) g"
        )
        connection.execute(
            "INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key,"
            " attempt, manager_id, state, receipt_position)"
            " SELECT 't', 'cap' || g, 'r' || g / 100, 'k' || g, 1, 'm', 'CONSUMED', g"
            " FROM generate_series(0, 399) g"
        )
        connection.execute("SET plan_cache_mode = force_generic_plan")
        yield connection


@pytest.mark.parametrize(("index", "statement"), LOOKUPS)
def test_generic_plan_uses_the_primary_key(
    conn: psycopg.Connection, index: str, statement: str
) -> None:
    conn.execute(f"PREPARE lookup(text, text) AS {statement}")
    try:
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN EXECUTE lookup('t', 'x')"))
    finally:
        conn.execute("DEALLOCATE lookup")
    assert f" using {index} " in plan, plan

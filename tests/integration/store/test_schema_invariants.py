"""The schema itself refuses rows that break the lifecycle's invariants."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from arvis.store.engine import libpq_url

PLAN = "p" * 64


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(libpq_url(database_url)) as connection:
        connection.execute(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')", (PLAN,)
        )
        connection.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) "
            "VALUES ('t1', 'r1', %s, 'genesis')",
            (PLAN,),
        )
        connection.execute(
            "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool, "
            "payload_digest, attempts, in_flight) VALUES ('t1', 'k1', 'r1', 'c1', 'echo', 'd', 2, "
            "true)"
        )
        for attempt in (1, 2):
            connection.execute(
                "INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key, "
                "attempt, manager_id, state) VALUES ('t1', %s, 'r1', 'k1', %s, 'm', 'MINTED')",
                (f"cap{attempt}", attempt),
            )
        yield connection
        connection.rollback()


def _intent(conn: psycopg.Connection, attempt: int, *, settled: bool) -> None:
    conn.execute(
        "INSERT INTO intents (tenant_id, intent_id, run_id, causal_id, idempotency_key, attempt, "
        "tool, plan_id, payload, payload_digest, capability_id, commitment, receipt_position, "
        "context, instance_id, settled, settled_at) VALUES ('t1', %s, 'r1', 'c1', 'k1', %s, "
        "'echo', 'pppp', '{}', 'd', %s, 'c', nextval('receipt_position_seq'), '{}', 'i', %s, "
        "CASE WHEN %s THEN now() END)",
        (f"intent{attempt}", attempt, f"cap{attempt}", settled, settled),
    )


def _journal(conn: psycopg.Connection, position: int, attempt: int | None) -> None:
    conn.execute(
        "INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id, "
        "idempotency_key, attempt, body, prev_hash, entry_hash, recorded_at) VALUES "
        "('t1', 'r1', %s, 'execution', 'c1', 'k1', %s, '{}', 'p', 'e', now())",
        (position, attempt),
    )


def test_a_second_unsettled_attempt_for_one_idempotency_key_is_rejected(
    conn: psycopg.Connection,
) -> None:
    _intent(conn, 1, settled=False)
    with pytest.raises(psycopg.errors.UniqueViolation, match="one_unsettled_attempt"):
        _intent(conn, 2, settled=False)


def test_a_new_attempt_is_accepted_once_the_earlier_one_is_settled(
    conn: psycopg.Connection,
) -> None:
    _intent(conn, 1, settled=True)
    _intent(conn, 2, settled=False)


def test_a_duplicate_journal_position_in_a_run_is_rejected(conn: psycopg.Connection) -> None:
    _journal(conn, 1, 1)
    with pytest.raises(psycopg.errors.UniqueViolation, match="pk_journal_entries"):
        _journal(conn, 1, 2)


def test_a_second_result_for_one_attempt_is_rejected(conn: psycopg.Connection) -> None:
    _journal(conn, 1, 1)
    with pytest.raises(psycopg.errors.UniqueViolation, match="one_result_per_attempt"):
        _journal(conn, 2, 1)


def test_an_unknown_capability_state_is_rejected(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="state_known"):
        conn.execute(
            "UPDATE capabilities SET state = 'BORROWED', receipt_position = 7 "
            "WHERE capability_id = 'cap1'"
        )


def test_unknown_boundaries_and_confirmation_states_are_rejected(
    conn: psycopg.Connection,
) -> None:
    _intent(conn, 1, settled=False)
    _journal(conn, 1, 1)
    conn.execute(
        "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id, "
        "idempotency_key, tool, payload_digest, payload, state, context, expires_at) VALUES "
        "('t1', 'cf1', 'r1', 'c1', 'k1', 'echo', 'd', '{}', 'PENDING', '{}', now())"
    )
    for statement in (
        "UPDATE intents SET boundary = 'EFFECT_PROBABLY_FINE'",
        "UPDATE journal_entries SET boundary = 'EFFECT_PROBABLY_FINE'",
        "UPDATE confirmations SET state = 'MAYBE'",
        "UPDATE actions SET last_boundary = 'SOMETHING'",
    ):
        conn.execute("SAVEPOINT s")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(statement)
        conn.execute("ROLLBACK TO SAVEPOINT s")


@pytest.mark.parametrize("tenant", [None, ""])
def test_a_row_without_tenant_is_rejected(conn: psycopg.Connection, tenant: str | None) -> None:
    with pytest.raises((psycopg.errors.NotNullViolation, psycopg.errors.CheckViolation)):
        conn.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) "
            "VALUES (%s, 'r2', %s, 'g')",
            (tenant, PLAN),
        )


def test_an_intent_cannot_point_at_a_run_of_another_tenant(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) VALUES ('t2', 'r2', %s, 'g')",
        (PLAN,),
    )
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute(
            "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool, "
            "payload_digest, attempts, in_flight) VALUES ('t2', 'k9', 'r1', 'c1', 'echo', 'd', 0, "
            "false)"
        )


def test_an_active_capability_needs_the_receipt_that_activated_it(
    conn: psycopg.Connection,
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="active_has_receipt"):
        conn.execute("UPDATE capabilities SET state = 'ACTIVE' WHERE capability_id = 'cap1'")


def test_one_causal_id_names_one_decision(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.UniqueViolation, match="causal_id"):
        conn.execute(
            "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool, "
            "payload_digest, attempts, in_flight) VALUES ('t1', 'k2', 'r1', 'c1', 'other', "
            "'d2', 0, false)"
        )

"""The schema itself refuses rows that break the lifecycle's invariants (revision 0005)."""

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
            "INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,"
            " payload_digest, payload) VALUES ('t1', 'r1', 'c1', 'k1', 'echo', 'd', '{}')"
        )
        yield connection
        connection.rollback()


def _attempt(conn: psycopg.Connection, attempt: int, *, key: str = "k1") -> None:
    conn.execute(
        "INSERT INTO attempts (tenant_id, idempotency_key, attempt, run_id, causal_id, tool,"
        " plan_id, intent_id, capability_id, commitment, receipt_position, context, owner)"
        " VALUES ('t1', %s, %s, 'r1', 'c1', 'echo', %s, %s, %s, 'c', %s, '{}', 'i/1')",
        (key, attempt, PLAN, f"int{attempt}", f"cap{attempt}", attempt),
    )


def _journal(conn: psycopg.Connection, position: int, attempt: int | None) -> None:
    conn.execute(
        "INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id, "
        "idempotency_key, attempt, body, prev_hash, entry_hash, recorded_at) VALUES "
        "('t1', 'r1', %s, 'execution', 'c1', 'k1', %s, '{}', 'p', 'e', now())",
        (position, attempt),
    )


def test_a_second_attempt_in_flight_for_one_idempotency_key_is_rejected(
    conn: psycopg.Connection,
) -> None:
    _attempt(conn, 1)
    with pytest.raises(psycopg.errors.UniqueViolation, match="pk_attempts"):
        _attempt(conn, 2)


def test_a_new_attempt_is_accepted_once_the_earlier_one_is_settled(
    conn: psycopg.Connection,
) -> None:
    _attempt(conn, 1)
    # Settling is the entry's append and the in-flight row's removal, together.
    _journal(conn, 1, 1)
    conn.execute("DELETE FROM attempts WHERE idempotency_key = 'k1' AND attempt = 1")
    _attempt(conn, 2)


def test_a_duplicate_journal_position_in_a_run_is_rejected(conn: psycopg.Connection) -> None:
    _journal(conn, 1, 1)
    with pytest.raises(psycopg.errors.UniqueViolation, match="pk_journal_entries"):
        _journal(conn, 1, 2)


def test_a_second_result_for_one_attempt_is_rejected(conn: psycopg.Connection) -> None:
    _journal(conn, 1, 1)
    with pytest.raises(psycopg.errors.UniqueViolation, match="one_result_per_attempt"):
        _journal(conn, 2, 1)


def test_unknown_boundaries_and_confirmation_states_are_rejected(
    conn: psycopg.Connection,
) -> None:
    _journal(conn, 1, 1)
    conn.execute(
        "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id, "
        "idempotency_key, tool, payload_digest, payload, state, context, expires_at) VALUES "
        "('t1', 'cf1', 'r1', 'c1', 'k1', 'echo', 'd', '{}', 'PENDING', '{}', now())"
    )
    for statement in (
        "UPDATE journal_entries SET boundary = 'EFFECT_PROBABLY_FINE'",
        "UPDATE journal_entries SET kind = 'rumour'",
        "UPDATE confirmations SET state = 'MAYBE'",
    ):
        conn.execute("SAVEPOINT s")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(statement)
        conn.execute("ROLLBACK TO SAVEPOINT s")


def test_an_attempt_number_is_positive(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="attempt_positive"):
        _attempt(conn, 0)


@pytest.mark.parametrize("tenant", [None, ""])
def test_a_row_without_tenant_is_rejected(conn: psycopg.Connection, tenant: str | None) -> None:
    # Citus refuses a NULL shard key before the constraint does (NullValueNotAllowed).
    refused = (
        psycopg.errors.NotNullViolation,
        psycopg.errors.CheckViolation,
        psycopg.errors.NullValueNotAllowed,
    )
    with pytest.raises(refused):
        conn.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) "
            "VALUES (%s, 'r2', %s, 'g')",
            (tenant, PLAN),
        )


def test_a_decision_cannot_point_at_a_run_of_another_tenant(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) VALUES ('t2', 'r2', %s, 'g')",
        (PLAN,),
    )
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute(
            "INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,"
            " payload_digest) VALUES ('t2', 'r1', 'c9', 'k9', 'echo', 'd')"
        )


def test_an_attempt_belongs_to_a_decision_of_its_tenant(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        conn.execute(
            "INSERT INTO attempts (tenant_id, idempotency_key, attempt, run_id, causal_id, tool,"
            " plan_id, intent_id, capability_id, commitment, receipt_position, context, owner)"
            " VALUES ('t1', 'k7', 1, 'r1', 'no-such-decision', 'echo', %s, 'i', 'c', 'c', 1,"
            " '{}', 'i/1')",
            (PLAN,),
        )


def test_one_causal_id_names_one_decision(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.UniqueViolation, match="pk_decisions"):
        conn.execute(
            "INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,"
            " payload_digest) VALUES ('t1', 'r1', 'c1', 'k2', 'other', 'd2')"
        )

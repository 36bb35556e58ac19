"""The hot path's journal statement (arvis_journal_append asked to settle): one
chain entry per attempt, the attempt settled with it, the same result answered
again as stored, another result refused, consent settled as DESIGN §2 says."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import psycopg
import pytest

from arvis.domain.artifacts import GENESIS_HASH
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.journal import chain_hash
from arvis.lifecycle.ports import JournalEntry
from arvis.store.database import PgStore
from arvis.store.engine import libpq_url

PLAN = "p" * 64
_numbers = itertools.count()


async def _admitted(store: PgStore, run: str) -> dict[str, str]:
    n = next(_numbers)
    ids = {"run": run, "key": f"key-{n}", "intent": f"int-{n}", "causal": f"c-{n}"}
    answer = await store.fast.admit(
        tenant_id="t",
        run_id=run,
        plan_id=PLAN,
        causal_id=ids["causal"],
        idempotency_key=ids["key"],
        tool="echo",
        payload_digest="d",
        capability_id=f"cap-{n}",
        manager_id="m",
        intent_id=ids["intent"],
        payload_text='{"n":1}',
        commitment="c",
        context_json="{}",
        instance_id="i",
    )
    assert answer.status == "admitted"
    return ids


async def _journal(
    store: PgStore, ids: dict[str, str], boundary: str, body: str, confirmation: str | None = None
) -> JournalEntry:
    return await store.fast.journal_execution(
        tenant_id="t",
        run_id=ids["run"],
        causal_id=ids["causal"],
        idempotency_key=ids["key"],
        attempt=1,
        intent_id=ids["intent"],
        boundary=boundary,
        body_text=body,
        recorded_at=datetime(2026, 11, 30, 12, tzinfo=UTC),
        retryable=False,
        confirmation_id=confirmation,
    )


def _row(url: str, sql: str, *params: object) -> tuple[object, ...]:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row


@pytest.fixture(scope="module", autouse=True)
def plan(database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url)) as conn:
        conn.execute("INSERT INTO tool_plans VALUES (%s, '[]')", (PLAN,))


async def test_appends_a_chained_entry_and_settles_the_attempt(
    store: PgStore, database_url: str
) -> None:
    first = await _admitted(store, "run-a")
    entry = await _journal(store, first, "EFFECT_COMPLETED", '{"n":1}')
    second = await _admitted(store, "run-a")
    following = await _journal(store, second, "EFFECT_FAILED", '{"n":2}')

    assert (entry.position, entry.prev_hash) == (1, GENESIS_HASH)
    assert (following.position, following.prev_hash) == (2, entry.entry_hash)
    assert entry.entry_hash == chain_hash(
        prev_hash=GENESIS_HASH,
        tenant_id="t",
        run_id="run-a",
        position=1,
        kind="execution",
        causal_id=first["causal"],
        idempotency_key=first["key"],
        attempt=1,
        intent_id=first["intent"],
        boundary="EFFECT_COMPLETED",
        recorded_at="2026-11-30T12:00:00.000000+00:00",
        body_text='{"n":1}',
    )
    assert _row(
        database_url,
        "SELECT settled, boundary FROM intents WHERE intent_id = %s",
        first["intent"],
    ) == (True, "EFFECT_COMPLETED")
    assert _row(
        database_url,
        "SELECT in_flight, last_boundary, last_position FROM actions WHERE idempotency_key = %s",
        second["key"],
    ) == (False, "EFFECT_FAILED", 2)
    assert _row(
        database_url, "SELECT journal_length, journal_head FROM runs WHERE run_id = 'run-a'"
    ) == (2, following.entry_hash)


async def test_the_same_result_again_is_answered_as_stored(
    store: PgStore, database_url: str
) -> None:
    ids = await _admitted(store, "run-b")
    entry = await _journal(store, ids, "EFFECT_COMPLETED", '{"n":1}')
    again = await _journal(store, ids, "EFFECT_COMPLETED", '{"n":1}')

    assert (again.position, again.entry_hash) == (entry.position, entry.entry_hash)
    assert _row(database_url, "SELECT journal_length FROM runs WHERE run_id = 'run-b'") == (1,)


async def test_another_result_for_the_attempt_is_a_conflict_and_changes_nothing(
    store: PgStore, database_url: str
) -> None:
    ids = await _admitted(store, "run-c")
    entry = await _journal(store, ids, "EFFECT_COMPLETED", '{"n":1}')

    with pytest.raises(JournalConflict):
        await _journal(store, ids, "EFFECT_FAILED", '{"n":1}')
    with pytest.raises(JournalConflict):
        await _journal(store, ids, "EFFECT_COMPLETED", '{"n":2}')

    assert _row(
        database_url, "SELECT journal_length, journal_head FROM runs WHERE run_id = 'run-c'"
    ) == (1, entry.entry_hash)
    assert _row(
        database_url, "SELECT last_boundary FROM actions WHERE idempotency_key = %s", ids["key"]
    ) == ("EFFECT_COMPLETED",)


@pytest.mark.parametrize(
    ("boundary", "consent"),
    [("EFFECT_NOT_STARTED", "APPROVED"), ("EFFECT_STARTED", "CONSUMED")],
)
async def test_consent_is_released_only_when_nothing_started(
    store: PgStore, database_url: str, boundary: str, consent: str
) -> None:
    ids = await _admitted(store, f"run-{boundary}")
    with psycopg.connect(libpq_url(database_url)) as conn:
        conn.execute(
            "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
            " idempotency_key, tool, payload_digest, payload, state, context, expires_at)"
            " VALUES ('t', %s, %s, %s, %s, 'echo', 'd', '{}', 'RESERVED', '{}',"
            " now() + interval '1 hour')",
            (f"cnf-{boundary}", ids["run"], ids["causal"], ids["key"]),
        )

    await _journal(store, ids, boundary, "{}", confirmation=f"cnf-{boundary}")

    assert _row(
        database_url,
        "SELECT state FROM confirmations WHERE confirmation_id = %s",
        f"cnf-{boundary}",
    ) == (consent,)

"""Revision 0010 (runs bound to their principal) from a populated database, and back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arvis.domain.ids import PrincipalId
from arvis.lifecycle.errors import RunOfAnotherPrincipal
from arvis.store.migrate import downgrade, upgrade
from tests.support.lifecycle import AGENT, make_harness
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

BOB = AGENT.model_copy(update={"principal_id": PrincipalId("bob"), "key_id": "k_bob"})


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0009")
        yield url
    finally:
        drop_database(pg_server_url, url)


def _functions(url: str, name: str) -> list[int]:
    return [
        row[0]
        for row in _sql(url, "SELECT pronargs FROM pg_proc WHERE proname = %s ORDER BY 1", name)
    ]


PLAN = "p" * 64


def _run(url: str, run: str, entries: int = 0) -> None:
    _sql(
        url,
        "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head, journal_length)"
        " VALUES (%s, %s, %s, %s, %s)",
        AGENT.tenant_id,
        run,
        PLAN,
        "0" * 64,
        entries,
    )


def _entry(url: str, run: str, position: int, kind: str, body: str, minute: int) -> None:
    _sql(
        url,
        "INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,"
        " idempotency_key, attempt, boundary, body, prev_hash, entry_hash, recorded_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, NULL, 'EFFECT_COMPLETED', %s, %s, %s,"
        " timestamptz '2026-12-01 12:00+00' + make_interval(mins => %s))",
        AGENT.tenant_id,
        run,
        position,
        kind,
        f"c{position}",
        f"key-{run}-{position}",
        body,
        "0" * 64,
        f"{position:064d}",
        minute,
    )


def _populate_0009(url: str) -> None:
    """Runs as revision 0009 left them: nothing bound them to anyone; Bob (a stranger)
    had posted into Alice's (AGENT's) run after her."""
    alice, bob = AGENT.principal_id, BOB.principal_id
    _sql(url, "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')", PLAN)
    _run(url, "run-alice", 2)
    _entry(url, "run-alice", 1, "execution", f'{{"context":{{"principal_id":"{alice}"}}}}', 1)
    _entry(url, "run-alice", 2, "refusal", f'{{"principal_id":"{bob}"}}', 2)
    _run(url, "run-refused", 1)
    _entry(url, "run-refused", 1, "refusal", f'{{"principal_id":"{bob}"}}', 3)
    # Before revision 0005 an execution named no context: the consent asked earlier does.
    _run(url, "run-asked", 1)
    _entry(url, "run-asked", 1, "execution", '{"tool":"t"}', 9)
    _sql(
        url,
        "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
        " idempotency_key, tool, payload_digest, payload, state, context, expires_at,"
        " created_at) VALUES (%s, 'cnf_1', 'run-asked', 'c', 'k-asked', 't', 'd', '{}',"
        " 'CONSUMED', %s, now(), timestamptz '2026-12-01 12:05+00')",
        AGENT.tenant_id,
        f'{{"principal_id":"{alice}"}}',
    )
    _run(url, "run-empty")


async def test_existing_runs_are_bound_to_the_principal_of_their_first_step(
    database: str,
) -> None:
    _populate_0009(database)

    upgrade(database)

    bound = dict(_sql(database, "SELECT run_id, principal_id FROM runs ORDER BY run_id"))
    assert bound == {
        "run-alice": AGENT.principal_id,
        "run-asked": AGENT.principal_id,
        "run-empty": None,
        "run-refused": BOB.principal_id,
    }
    assert _functions(database, "arvis_bind") == [9]
    harness = await make_harness(database)
    try:
        with pytest.raises(RunOfAnotherPrincipal):
            await harness.execute("read", {"q": 3}, run_id="run-alice", causal_id="c", identity=BOB)
        again = await harness.execute("read", {"q": 3}, run_id="run-alice", causal_id="c")
        assert again.outcome == "executed"
        # A run that recorded nobody is bound by its next step.
        await harness.execute("read", {"q": 4}, run_id="run-empty", causal_id="a", identity=BOB)
        with pytest.raises(RunOfAnotherPrincipal):
            await harness.execute("read", {"q": 5}, run_id="run-empty", causal_id="b")
    finally:
        await harness.close()
    assert _sql(database, "SELECT principal_id FROM runs WHERE run_id = 'run-empty'") == [
        (BOB.principal_id,)
    ]


async def test_downgrade_unbinds_runs_and_keeps_their_chains(database: str) -> None:
    upgrade(database)
    harness = await make_harness(database)
    try:
        run = harness.run_id
        assert (await harness.execute("read", {"q": 1})).outcome == "executed"
    finally:
        await harness.close()

    downgrade(database, "0009")

    assert _functions(database, "arvis_bind") == [8]
    columns = _sql(
        database,
        "SELECT count(*) FROM information_schema.columns"
        " WHERE table_name = 'runs' AND column_name = 'principal_id'",
    )
    assert columns == [(0,)]
    assert _sql(database, "SELECT count(*) FROM journal_entries WHERE run_id = %s", run) == [(1,)]
    upgrade(database)
    assert _sql(database, "SELECT principal_id FROM runs WHERE run_id = %s", run) == [
        (AGENT.principal_id,)
    ]

"""Revisions 0012 (group commit), 0015 (Citus-ready steps, the run's row lock), 0016 (a
key's last use) and 0017 (console sessions of ID tokens), down to 0011 from a database
that holds a run, keys and sessions, and up again.

Downgrade gives 0011's journal writer back (one typed argument, no tenant first) and
drops the batch statements; a key keeps its row without its last-use time; a key's
console session stays and an ID token's is deleted (its person signs in again). The
run's chain goes on under 0011's writer and again under the head's, and verifies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from arvis.domain.ids import RunId
from arvis.store.migrate import downgrade, upgrade
from tests.support.lifecycle import AGENT, make_harness
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

RUN = "run-wave3"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


def _arguments(url: str, name: str) -> list[tuple[Any, ...]]:
    return _sql(url, "SELECT pronargs FROM pg_proc WHERE proname = %s ORDER BY 1", name)


def _columns(url: str, table: str) -> set[str]:
    rows = _sql(
        url, "SELECT column_name FROM information_schema.columns WHERE table_name = %s", table
    )
    return {name for (name,) in rows}


def _seed_keys_and_sessions(url: str) -> None:
    tenant = AGENT.tenant_id
    _sql(
        url,
        "INSERT INTO api_keys (tenant_id, key_id, principal, roles, secret_hash, last_used_at)"
        " VALUES (%s, 'k0000000000000001', 'auditor-1', '{auditor}', repeat('a', 64), now())",
        tenant,
    )
    _sql(
        url,
        "INSERT INTO console_sessions (tenant_id, token_hash, key_id, expires_at)"
        " VALUES (%s, repeat('1', 64), 'k0000000000000001', now() + interval '1 hour')",
        tenant,
    )
    identity = {"tenant_id": tenant, "principal_id": "alice", "roles": ["approver"]}
    _sql(
        url,
        "INSERT INTO console_sessions (tenant_id, token_hash, identity, expires_at)"
        " VALUES (%s, repeat('2', 64), %s::jsonb, now() + interval '1 hour')",
        tenant,
        json.dumps(identity),
    )


def _append_under_0011(url: str, position: int) -> tuple[Any, ...]:
    """A recovery entry journaled through revision 0011's writer (its one typed argument)."""
    step = {
        "tenant": AGENT.tenant_id,
        "run": RUN,
        "kind": "recovery",
        "causal": f"old-{position}",
        "idempotency_key": f"{position:064x}",
        "attempt": 1,
        "intent": f"int_old_{position}",
        "boundary": "EFFECT_STATE_UNKNOWN",
        "retryable": False,
        "body": '{"tool":"read"}',
        "recorded_at": f"2026-12-0{position}T12:00:00.000000+00:00",
        "settle": False,
        "release_budgets": False,
    }
    [row] = _sql(
        url,
        "SELECT out_status, out_position FROM arvis_journal("
        "jsonb_populate_record(NULL::arvis_journal_step, %s::jsonb))",
        json.dumps(step),
    )
    return tuple(row)


async def test_a_run_keys_and_sessions_go_down_to_0011_and_back(database: str) -> None:
    harness = await make_harness(database)
    try:
        first = await harness.execute("read", run_id=RUN)
        assert first.journal_position == 1
    finally:
        await harness.close()
    _seed_keys_and_sessions(database)

    downgrade(database, "0011")
    assert _arguments(database, "arvis_journal") == [(1,)]
    for gone in ("arvis_admit_batch", "arvis_journal_batch", "arvis_lock_runs"):
        assert _arguments(database, gone) == []
    assert "last_used_at" not in _columns(database, "api_keys")
    assert "identity" not in _columns(database, "console_sessions")
    assert _sql(database, "SELECT key_id FROM console_sessions") == [("k0000000000000001",)]
    assert _sql(database, "SELECT principal FROM api_keys") == [("auditor-1",)]
    assert _append_under_0011(database, 2) == ("appended", 2)

    upgrade(database)
    assert _arguments(database, "arvis_journal") == [(2,)]
    assert _sql(database, "SELECT last_used_at FROM api_keys") == [(None,)]
    harness = await make_harness(database, instance_id="after-upgrade")
    try:
        later = await harness.execute("read", run_id=RUN)
        assert later.journal_position == 3
        report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(RUN))
        assert (report.ok, report.entries) == (True, 3)
    finally:
        await harness.close()

"""Revisions 0012 (group commit), 0015 (Citus-ready steps, the run's row lock), 0016 (a
key's last use), 0017 (console sessions of ID tokens) and 0018 (where Slack's messages
are, the policy that asked for a consent), down to 0011 from a database that holds a
run, keys, sessions, a consent and its Slack message, and up again.

Downgrade to 0017 drops the Slack messages and the consent's policy, and 0015's
``arvis_request_consent`` asks for consent again. Down to 0011 gives 0011's journal
writer back (one typed argument, no tenant first) and drops the batch statements; a key
keeps its row without its last-use time; a key's console session stays and an ID
token's is deleted (its person signs in again). The run's chain goes on under 0011's
writer and again under the head's, and verifies; a consent asked at the head records
its policy again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from arvis.domain.ids import ConfirmationId, RunId
from arvis.store.migrate import downgrade, upgrade
from arvis.store.posted import PgPostedMessages
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


def _policies(url: str) -> list[Any]:
    return [policy for (policy,) in _sql(url, "SELECT policy FROM confirmations ORDER BY 1")]


def _ask_under_0015(url: str) -> tuple[Any, ...]:
    """A consent asked through revision 0015's ``arvis_request_consent`` (terms with a
    policy it does not know: ignored)."""
    [(plan,)] = _sql(url, "SELECT plan_id FROM runs WHERE run_id = %s", RUN)
    context = {"tenant_id": AGENT.tenant_id, "principal_id": AGENT.principal_id}
    terms = {"approver_groups": [], "quorum": 1, "policy": {"engine": "rules"}}
    [row] = _sql(
        url,
        "SELECT out_status FROM arvis_request_consent(%s, %s, %s, 'old-consent', %s,"
        " 'append', %s, 'cnf_old', '{}', %s, now() + interval '1 hour', now(), %s::jsonb)",
        AGENT.tenant_id,
        RUN,
        plan,
        "e" * 64,
        "d" * 64,
        json.dumps(context),
        json.dumps(terms),
    )
    return tuple(row)


async def _ask_and_post(url: str, instance_id: str) -> None:
    """A consent asked at the head, and its message recorded as Slack's destination does."""
    harness = await make_harness(url, instance_id=instance_id)
    try:
        asked = await harness.execute("append", run_id=RUN)
        assert asked.confirmation is not None
        posted = PgPostedMessages(harness.store.engine)
        tenant, confirmation = AGENT.tenant_id, ConfirmationId(asked.confirmation.id)
        await posted.begin(tenant, confirmation, 1, "C0APPROVALS")
        await posted.posted(tenant, confirmation, 1, "1796000000.000001")
    finally:
        await harness.close()


async def test_a_run_keys_sessions_and_a_consent_go_down_to_0011_and_back(database: str) -> None:
    harness = await make_harness(database)
    try:
        first = await harness.execute("read", run_id=RUN)
        assert first.journal_position == 1
    finally:
        await harness.close()
    _seed_keys_and_sessions(database)
    await _ask_and_post(database, "before-downgrade")
    [asked] = _policies(database)
    assert asked["policy_ids"] == ["default.consent_for_mutating_unsafe"]
    assert asked["reason"] == "tool 'append' is mutating and replay-unsafe"

    downgrade(database, "0017")
    assert "policy" not in _columns(database, "confirmations")
    assert _sql(database, "SELECT to_regclass('slack_messages')") == [(None,)]
    assert _ask_under_0015(database) == ("created",)

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
    assert _policies(database) == [None, None]  # asked before 0018, or down under it
    assert _sql(database, "SELECT count(*) FROM slack_messages") == [(0,)]
    await _ask_and_post(database, "after-upgrade-consent")
    assert [p is None for p in _policies(database)].count(False) == 1
    assert _sql(database, "SELECT round, channel, message_ts FROM slack_messages") == [
        (1, "C0APPROVALS", "1796000000.000001")
    ]
    harness = await make_harness(database, instance_id="after-upgrade")
    try:
        later = await harness.execute("read", run_id=RUN)
        assert later.journal_position == 3
        report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(RUN))
        assert (report.ok, report.entries) == (True, 3)
    finally:
        await harness.close()

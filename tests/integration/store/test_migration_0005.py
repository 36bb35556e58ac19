"""Revision 0005 from a database that holds data: what the old schema recorded, the new one
keeps (decisions, attempts in flight, chains, consent), and back again."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.ids import CausalId, RunId, TenantId
from arvis.domain.intent import GENESIS_HASH, intent_commitment
from arvis.domain.payload import freeze_payload
from arvis.store.database import PgStore
from arvis.store.migrate import downgrade, upgrade
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import StaticToolPlanSource
from tests.support.lifecycle import AGENT, make_harness, standard_tools
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

TENANT = AGENT.tenant_id
RUN = "run-old"


@pytest.fixture
def old_database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0004")
        yield url
    finally:
        drop_database(pg_server_url, url)


def _populate_through_the_0004_functions(url: str) -> dict[str, str]:
    """A run as revision 0004's statements left it: one completed call, one call
    still in flight (its process died), one refusal, and an approved consent."""
    plan = StaticToolPlanSource(ToolDispatcher(standard_tools().values())).current
    _sql(
        url,
        "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, %s)",
        plan.plan_id,
        json.dumps(plan.records()),
    )
    keys = {}
    for n, causal in enumerate(("done", "crashed"), start=1):
        payload = freeze_payload({"q": n})
        key = derive_idempotency_key(TENANT, RunId(RUN), CausalId(causal), "read", payload.digest)
        keys[causal] = key
        # The commitment admission computed: what the entry settling it commits to.
        commitment = intent_commitment(
            intent_id=f"int{n}",
            tenant_id=TENANT,
            run_id=RUN,
            causal_id=causal,
            principal_id=AGENT.principal_id,
            tool="read",
            plan_id=plan.plan_id,
            payload_digest=payload.digest,
            idempotency_key=key,
            attempt=1,
            capability_id=f"cap{n}",
        )
        status = _sql(
            url,
            "SELECT out_status FROM arvis_admit(%s, %s, %s, %s, %s, 'read', %s, %s, 'm', %s,"
            " %s, %s, %s, 'dead-instance')",
            TENANT,
            RUN,
            plan.plan_id,
            causal,
            key,
            payload.digest,
            f"cap{n}",
            f"int{n}",
            payload.canonical.decode(),
            commitment,
            json.dumps(
                {
                    "tenant_id": TENANT,
                    "principal_id": AGENT.principal_id,
                    "auth_method": "api_key",
                    "key_id": None,
                    "roles": [],
                    "run_id": RUN,
                    "causal_id": causal,
                    "plan_id": plan.plan_id,
                    "instance_id": "dead-instance",
                }
            ),
        )
        assert status == [("admitted",)]
    body = json.dumps(
        {
            "tool": "read",
            "plan_id": plan.plan_id,
            "payload_digest": freeze_payload({"q": 1}).digest,
            "principal_id": AGENT.principal_id,
            "capability_id": "cap1",
            "confirmation_id": None,
            "receipt": {"position": 1, "intent_commitment": "commitment", "store_fingerprint": "f"},
            "result": {"q": 1},
            "problem": None,
            "retryable": False,
        },
        separators=(",", ":"),
        sort_keys=True,
    )
    _sql(
        url,
        "SELECT arvis_journal_append(%s, %s, 'execution', 'done', %s, 1, 'int1',"
        " 'EFFECT_COMPLETED', %s, '2026-11-30T12:00:00.000000+00:00', true, false, NULL)",
        TENANT,
        RUN,
        keys["done"],
        body,
    )
    return keys


def test_upgrade_keeps_decisions_attempts_and_chains_and_downgrade_restores_them(
    old_database: str,
) -> None:
    keys = _populate_through_the_0004_functions(old_database)

    upgrade(old_database)

    assert _sql(old_database, "SELECT causal_id, idempotency_key FROM decisions ORDER BY 1") == [
        ("crashed", keys["crashed"]),
        ("done", keys["done"]),
    ]
    assert _sql(old_database, "SELECT causal_id, owner FROM attempts") == [
        ("crashed", "dead-instance")
    ]
    assert _sql(old_database, "SELECT receipts FROM runs WHERE run_id = %s", RUN)[0][0] >= 2
    head = _sql(
        old_database, "SELECT journal_length, journal_head FROM runs WHERE run_id = %s", RUN
    )
    assert head[0][0] == 1
    assert head[0][1] != GENESIS_HASH

    downgrade(old_database, "0004")

    assert _sql(old_database, "SELECT causal_id, attempts, in_flight FROM actions ORDER BY 1") == [
        ("crashed", 1, True),
        ("done", 1, False),
    ]
    assert _sql(old_database, "SELECT causal_id, settled FROM intents ORDER BY 1") == [
        ("crashed", False),
        ("done", True),
    ]
    assert _sql(old_database, "SELECT count(*) FROM capabilities WHERE state = 'CONSUMED'") == [
        (2,)
    ]
    upgrade(old_database)
    assert _sql(old_database, "SELECT causal_id FROM attempts") == [("crashed",)]


async def test_after_the_upgrade_the_lifecycle_goes_on_where_the_old_one_stopped(
    old_database: str,
) -> None:
    keys = _populate_through_the_0004_functions(old_database)
    upgrade(old_database)
    harness = await make_harness(old_database)
    try:
        report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId(RUN))
        assert report.ok, report
        # The completed call answers its recorded result; nothing runs.
        again = await harness.execute("read", {"q": 1}, causal_id="done", run_id=RUN)
        assert (again.outcome, again.result) == ("deduplicated", {"q": 1})
        # The dead instance's call in flight is recovered (its owner holds no lease).
        settled = await harness.lifecycle.sweeper.sweep()
        assert [(s.causal_id, s.boundary.value) for s in settled] == [
            ("crashed", "EFFECT_STATE_UNKNOWN")
        ]
        assert harness.tools["read"].calls == 0
        report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId(RUN))
        assert (report.ok, report.entries) == (True, 2)
        assert keys
    finally:
        await harness.close()


def test_the_store_opens_only_at_the_head_revision(old_database: str) -> None:
    import asyncio

    from arvis.store.errors import SchemaNotReady

    with pytest.raises(SchemaNotReady):
        asyncio.run(PgStore.open(old_database))

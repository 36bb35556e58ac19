"""Revision 0007 (budgets, the deciding policy on attempts) from a populated database, and back."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.ids import CausalId, RunId, TenantId
from arvis.domain.intent import intent_commitment
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.policy.budgets import BudgetConfig
from arvis.store.migrate import downgrade, upgrade
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import StaticToolPlanSource
from tests.support.lifecycle import AGENT, make_harness, standard_tools
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

TENANT = AGENT.tenant_id
RUN = "run-0005"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0006")
        yield url
    finally:
        drop_database(pg_server_url, url)


def _admit_through_0006(url: str, causal: str) -> str:
    """An attempt in flight as revision 0006's arvis_admit writes it (its process died)."""
    plan = StaticToolPlanSource(ToolDispatcher(standard_tools().values())).current
    _sql(
        url,
        "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        plan.plan_id,
        json.dumps(plan.records()),
    )
    payload = freeze_payload({"q": causal})
    key = derive_idempotency_key(TENANT, RunId(RUN), CausalId(causal), "read", payload.digest)
    context = {
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
    # The commitment admission computed: what the entry settling it commits to.
    commitment = intent_commitment(
        intent_id=f"int-{causal}",
        tenant_id=TENANT,
        run_id=RUN,
        causal_id=causal,
        principal_id=AGENT.principal_id,
        tool="read",
        plan_id=plan.plan_id,
        payload_digest=payload.digest,
        idempotency_key=key,
        attempt=1,
        capability_id=f"cap-{causal}",
    )
    status = _sql(
        url,
        "SELECT out_status FROM arvis_admit(%s, %s, %s, %s, %s, 'read', %s, 1, %s, %s, %s,"
        " %s, %s, 'dead-instance', NULL, false, NULL)",
        TENANT,
        RUN,
        plan.plan_id,
        causal,
        key,
        payload.digest,
        f"int-{causal}",
        f"cap-{causal}",
        payload.canonical.decode(),
        commitment,
        json.dumps(context),
    )
    assert status == [("admitted",)]
    return key


def _functions(url: str, name: str) -> list[int]:
    return [
        row[0]
        for row in _sql(url, "SELECT pronargs FROM pg_proc WHERE proname = %s ORDER BY 1", name)
    ]


async def test_an_attempt_admitted_before_0007_is_recovered_after_it(database: str) -> None:
    _admit_through_0006(database, "crashed")

    upgrade(database)

    assert _sql(database, "SELECT causal_id, policy, budgets FROM attempts") == [
        ("crashed", None, None)
    ]
    assert _functions(database, "arvis_admit") == [19]
    # One typed argument from 0011 on, after the tenant from 0015 on.
    assert _functions(database, "arvis_journal") == [2]
    harness = await make_harness(database)
    try:
        settled = await harness.lifecycle.sweeper.sweep()
        assert [(s.causal_id, s.boundary.value) for s in settled] == [
            ("crashed", "EFFECT_STATE_UNKNOWN")
        ]
        body = _sql(database, "SELECT body::jsonb FROM journal_entries WHERE run_id = %s", RUN)
        assert body[0][0]["policy"] is None  # admitted before policies were recorded
        report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId(RUN))
        assert report.ok, report
    finally:
        await harness.close()


async def test_downgrade_keeps_attempts_and_chains_and_drops_only_the_budgets(
    database: str,
) -> None:
    upgrade(database)
    harness = await make_harness(
        database,
        budgets=[BudgetConfig.model_validate({"name": "b", "limit": 5, "per": "1d"})],
    )
    try:
        run = harness.run_id
        assert (await harness.execute("read", {"q": 1})).outcome == "executed"
        await harness.execute("write", {"text": "x"})
    finally:
        await harness.close()
    assert _sql(database, "SELECT used FROM budget_usage") == [(2,)]

    downgrade(database, "0006")

    assert _sql(database, "SELECT to_regclass('budget_usage')") == [(None,)]
    assert _functions(database, "arvis_admit") == [17]
    assert _functions(database, "arvis_journal") == [24]
    entries = _sql(database, "SELECT count(*) FROM journal_entries WHERE run_id = %s", run)
    assert entries == [(2,)]
    _admit_through_0006(database, "after-downgrade")
    assert _sql(database, "SELECT causal_id FROM attempts") == [("after-downgrade",)]

    upgrade(database)
    assert _sql(database, "SELECT causal_id, budgets FROM attempts") == [("after-downgrade", None)]
    assert _sql(database, "SELECT count(*) FROM budget_usage") == [(0,)]

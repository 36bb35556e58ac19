"""Durable budgets through the SyscallHandler: charged once per admitted attempt in the
admission statement, given back only when nothing started, exact under concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from arvis.domain.ids import TenantId
from arvis.lifecycle.policy.budgets import BudgetConfig
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from tests.support.lifecycle import (
    AGENT,
    APPROVER,
    Harness,
    ScriptedTool,
    crash_during_dispatch,
    make_harness,
    standard_tools,
    tool_definition,
)
from tests.support.rules import OTHER_AGENT

MakeHarness = Callable[..., Awaitable[Harness]]


def budget(**fields: Any) -> BudgetConfig:
    return BudgetConfig.model_validate({"name": "writes", "per": "1d", **fields})


def tools() -> dict[str, ScriptedTool]:
    pay = tool_definition(
        "pay",
        schema={
            "type": "object",
            "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
        },
    )
    return {**standard_tools(), "pay": ScriptedTool(pay)}


@pytest.fixture
async def harnesses(database_url: str) -> AsyncIterator[MakeHarness]:
    made: list[Harness] = []

    async def make(*budgets: BudgetConfig, **kw: Any) -> Harness:
        kw.setdefault("tools", tools())
        harness = await make_harness(
            database_url, budgets=budgets, instance_id=f"budget-{len(made)}", **kw
        )
        made.append(harness)
        return harness

    try:
        yield make
    finally:
        for harness in reversed(made):
            await harness.close()


def used(harness: Harness, name: str = "writes") -> list[tuple[str, Decimal]]:
    return [
        (scope, amount)
        for scope, amount in harness.sql(
            "SELECT scope_key, used FROM budget_usage WHERE tenant_id = %s AND budget = %s"
            " ORDER BY window_start, scope_key",
            AGENT.tenant_id,
            name,
        )
    ]


def refusal_body(harness: Harness, causal_id: str) -> dict[str, Any]:
    rows = harness.sql(
        "SELECT body::jsonb FROM journal_entries WHERE run_id = %s AND causal_id = %s"
        " AND kind = 'refusal' ORDER BY position DESC LIMIT 1",
        harness.run_id,
        causal_id,
    )
    body: dict[str, Any] = rows[0][0]
    return body


@pytest.fixture(autouse=True)
def _fresh_budgets(database_url: str) -> None:
    # Budget rows span runs (and tests): each test counts from nothing.
    import psycopg

    from arvis.store.engine import libpq_url

    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute("DELETE FROM budget_usage")


async def test_a_call_beyond_the_limit_is_refused_naming_the_budget_and_its_reset(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(budget(limit=2, tools=["write"]))
    results = [await harness.execute("write", {"text": "x"}, causal_id=f"w{n}") for n in range(3)]
    assert [r.outcome for r in results] == ["executed", "executed", "refused"]
    assert results[2].reason == "budget_exceeded"
    midnight = harness.clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    resets = f"{midnight + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"
    assert results[2].detail == (
        f"budget 'writes' (at most 2 calls per 1d) is spent; it resets at {resets}"
    )
    assert harness.tools["write"].calls == 2
    denial = refusal_body(harness, "w2")["denial"]
    assert (denial["budget"], denial["resets_at"]) == ("writes", resets)
    assert used(harness) == [("{}", 2)]
    report = await harness.lifecycle.evidence.verify(TenantId(AGENT.tenant_id), harness.run_id)  # type: ignore[arg-type]
    assert report.ok


async def test_a_tool_no_budget_names_is_never_refused_by_one(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(limit=0, tools=["write"]))
    assert (await harness.execute("read", {"q": 1})).outcome == "executed"
    assert (await harness.execute("write", {"text": "x"})).reason == "budget_exceeded"


async def test_a_deduplicated_call_consumes_nothing(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(limit=1, tools=["write"]))
    assert (await harness.execute("write", {"text": "x"}, causal_id="once")).outcome == "executed"
    again = await harness.execute("write", {"text": "x"}, causal_id="once")
    assert again.outcome == "deduplicated"
    assert used(harness) == [("{}", 1)]


async def test_an_attempt_that_provably_did_not_start_gives_its_unit_back(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(budget(limit=1, tools=["write"]))
    harness.tools["write"].then_fail(effect_started=False, retryable=True)
    first = await harness.execute("write", {"text": "x"}, causal_id="flaky")
    assert (first.boundary.value if first.boundary else None) == "EFFECT_NOT_STARTED"
    assert used(harness) == [("{}", 0)]
    retry = await harness.execute("write", {"text": "x"}, causal_id="flaky")
    assert (retry.outcome, retry.attempt) == ("executed", 2)
    assert used(harness) == [("{}", 1)]


async def test_an_uncertain_outcome_keeps_holding_its_unit(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(limit=1, tools=["write"]))
    harness.tools["write"].then_fail(effect_started=None, retryable=False)
    first = await harness.execute("write", {"text": "x"}, causal_id="unknown")
    assert (first.boundary.value if first.boundary else None) == "EFFECT_STATE_UNKNOWN"
    assert used(harness) == [("{}", 1)]
    other = await harness.execute("write", {"text": "y"}, causal_id="other")
    assert other.reason == "budget_exceeded"


async def test_an_attempt_recovered_after_a_crash_keeps_holding_its_unit(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(budget(limit=1, tools=["write"]))
    await crash_during_dispatch(harness, "write", {"text": "x"}, causal_id="crashed")
    assert used(harness) == [("{}", 1)]
    settled = await harness.lifecycle.sweeper.sweep()
    assert [s.boundary.value for s in settled] == ["EFFECT_STATE_UNKNOWN"]
    assert used(harness) == [("{}", 1)]


async def test_an_amount_budget_admits_exactly_up_to_its_limit(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(name="spend", limit="500.00", field="amount", tools=["pay"]))
    answers = [
        (await harness.execute("pay", {"amount": amount})).outcome
        for amount in (200, 250.5, 49.6, 49.5, 0)
    ]
    assert answers == ["executed", "executed", "refused", "executed", "executed"]
    assert used(harness, "spend") == [("{}", Decimal("500.0"))]


@pytest.mark.parametrize(
    "payload", [{"amount": -1}, {"amount": -0.01}, {"to": "x"}], ids=["-1", "-0.01", "missing"]
)
async def test_an_amount_a_budget_cannot_count_is_refused_and_records_no_use(
    harnesses: MakeHarness, payload: dict[str, Any]
) -> None:
    harness = await harnesses(budget(name="spend", limit=10, field="amount", tools=["pay"]))
    result = await harness.execute("pay", payload)
    assert (result.outcome, result.reason) == ("refused", "payload_invalid")
    assert (result.detail or "").startswith("budget 'spend' counts it")
    assert harness.tools["pay"].calls == 0
    assert used(harness, "spend") == []


async def test_the_smallest_amount_is_charged_exactly(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(name="spend", limit=10, field="amount", tools=["pay"]))
    assert (await harness.execute("pay", {"amount": 5e-324})).outcome == "executed"
    assert used(harness, "spend") == [("{}", Decimal("5E-324"))]


async def test_a_budget_per_principal_counts_each_principal_apart(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(budget(limit=1, tools=["write"], scope=["principal"]))
    assert (await harness.execute("write", {"text": "a"})).outcome == "executed"
    assert (await harness.execute("write", {"text": "b"})).reason == "budget_exceeded"
    other = await harness.execute(
        "write", {"text": "c"}, identity=OTHER_AGENT, run_id=f"{harness.run_id}-other"
    )
    assert other.outcome == "executed"
    assert used(harness) == [('{"principal":"agent-7"}', 1), ('{"principal":"agent-9"}', 1)]


async def test_a_refused_decision_is_admitted_once_its_window_resets(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(budget(limit=1, per="1h", tools=["write"]))
    assert (await harness.execute("write", {"text": "a"})).outcome == "executed"
    refused = await harness.execute("write", {"text": "b"}, causal_id="later")
    assert (refused.reason, refused.attempt) == ("budget_exceeded", 1)
    harness.clock.advance(hours=1)
    again = await harness.execute("write", {"text": "b"}, causal_id="later")
    assert (again.outcome, again.attempt) == ("executed", 2)
    assert used(harness) == [("{}", 1), ("{}", 1)]


async def test_consent_given_before_a_budget_refusal_stays_given(harnesses: MakeHarness) -> None:
    harness = await harnesses(budget(limit=1, per="1h", tools=["append"]))
    assert (await harness.execute("read", {"q": 1})).outcome == "executed"
    asked = await harness.execute("append", {"line": "a"}, causal_id="a1")
    assert asked.confirmation is not None
    await harness.approve(asked.confirmation.id, APPROVER)
    assert (await harness.execute("append", {"line": "a"}, causal_id="a1")).outcome == "executed"
    second = await harness.execute("append", {"line": "b"}, causal_id="a2")
    assert second.confirmation is not None
    await harness.approve(second.confirmation.id, APPROVER)
    refused = await harness.execute("append", {"line": "b"}, causal_id="a2")
    assert refused.reason == "budget_exceeded"
    assert harness.confirmation_state(second.confirmation.id) == "APPROVED"
    harness.clock.advance(hours=1)
    assert (await harness.execute("append", {"line": "b"}, causal_id="a2")).outcome == "executed"
    assert harness.confirmation_state(second.confirmation.id) == "CONSUMED"


async def test_many_concurrent_callers_on_two_instances_end_exactly_at_the_limit(
    harnesses: MakeHarness,
) -> None:
    limit, callers = 13, 40
    shared = tools()
    first = await harnesses(budget(limit=limit, tools=["write"]), tools=shared)
    second = await harnesses(budget(limit=limit, tools=["write"]), tools=shared, clock=first.clock)

    async def call(n: int) -> str:
        harness = (first, second)[n % 2]
        result = await harness.execute(
            "write", {"text": str(n)}, run_id=f"{first.run_id}-{n % 7}", causal_id=f"c{n}"
        )
        return result.reason or result.outcome

    outcomes = await asyncio.gather(*(call(n) for n in range(callers)))
    assert outcomes.count("executed") == limit
    assert outcomes.count("budget_exceeded") == callers - limit
    assert shared["write"].calls == limit
    assert used(first) == [("{}", limit)]


async def test_without_budgets_an_attempt_carries_no_charges(harnesses: MakeHarness) -> None:
    harness = await harnesses()
    running = harness.tools["write"].then_block()
    task = asyncio.create_task(harness.execute("write", {"text": "x"}, causal_id="held"))
    await running.wait()
    assert harness.sql("SELECT budgets FROM attempts WHERE causal_id = 'held'") == [(None,)]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert harness.sql("SELECT count(*) FROM budget_usage") == [(0,)]


async def test_a_budget_refusal_is_an_attempt_the_retry_table_sees_as_free(
    harnesses: MakeHarness,
) -> None:
    harness = await harnesses(
        budget(limit=0, tools=["append"]),
        policy=PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False)),
    )
    first = await harness.execute("append", {"line": "a"}, causal_id="z")
    second = await harness.execute("append", {"line": "a"}, causal_id="z")
    assert [(r.reason, r.attempt) for r in (first, second)] == [
        ("budget_exceeded", 1),
        ("budget_exceeded", 2),
    ]

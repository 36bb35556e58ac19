"""The admission loop (DESIGN §2 step 1) through the SyscallHandler, on the in-memory store:
decide on the history, write, and decide again when the store says the history moved."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.errors import AttemptInFlight, RunOfAnotherPrincipal
from arvis.lifecycle.policy.budgets import BudgetConfig
from tests.support.fakelifecycle import FakeHarness, make_fake_harness
from tests.support.lifecycle import AGENT, APPROVER


async def test_a_call_runs_once_and_is_journaled_with_its_receipt(harness: FakeHarness) -> None:
    result = await harness.execute("read", {"n": 1}, causal_id="c")
    assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert (result.attempt, result.journal_position) == (1, 1)
    assert result.receipt is not None
    assert result.receipt.position == 1
    again = await harness.execute("read", {"n": 1}, causal_id="c")
    assert (again.outcome, again.journal_position) == ("deduplicated", 1)
    assert harness.tools["read"].calls == 1
    assert [e.kind for e in harness.entries()] == ["execution"]


async def test_a_causal_id_names_one_decision_for_ever(harness: FakeHarness) -> None:
    await harness.execute("read", {"n": 1}, causal_id="c")
    other = await harness.execute("read", {"n": 2}, causal_id="c")
    assert (other.outcome, other.reason) == ("refused", "causal_id_conflict")
    assert harness.tools["read"].calls == 1


async def test_a_run_is_bound_to_the_principal_that_opened_it(harness: FakeHarness) -> None:
    await harness.execute("read", {"n": 1}, causal_id="c")
    with pytest.raises(RunOfAnotherPrincipal):
        await harness.execute("read", {"n": 1}, causal_id="d", identity=APPROVER)
    assert harness.tools["read"].calls == 1
    assert len(harness.entries()) == 1


async def test_a_stale_first_guess_is_decided_again_on_the_real_history(
    harness: FakeHarness,
) -> None:
    harness.tools["write"].then_fail(effect_started=False, retryable=False)
    first = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_NOT_STARTED
    statements = harness.store.statements
    # The handler first assumes a new decision; the store answers 'stale' (attempt 1 is
    # taken), the history is read and the call admitted as attempt 2.
    second = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (second.outcome, second.attempt) == ("executed", 2)
    assert harness.store.statements - statements == 5  # admit, history, admit, start, journal


async def test_a_new_call_takes_two_statements(harness: FakeHarness) -> None:
    statements = harness.store.statements
    await harness.execute("read", {"n": 1}, causal_id="c")
    assert harness.store.statements - statements == 2


async def test_two_concurrent_posts_of_one_decision_run_it_once(harness: FakeHarness) -> None:
    running = harness.tools["write"].then_sleep(0.05)
    first = asyncio.create_task(harness.execute("write", {"text": "x"}, causal_id="c"))
    await running.wait()
    with pytest.raises(AttemptInFlight):
        await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (await first).outcome == "executed"
    again = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert again.outcome == "deduplicated"
    assert harness.tools["write"].calls == 1


async def test_a_spent_budget_refuses_and_charges_nothing() -> None:
    harness = await make_fake_harness(
        budgets=[BudgetConfig(name="calls", limit=Decimal(2), per="1h")]
    )
    try:
        results = [await harness.execute("read", {"n": n}) for n in range(3)]
        assert [r.outcome for r in results] == ["executed", "executed", "refused"]
        assert results[2].reason == "budget_exceeded"
        assert harness.tools["read"].calls == 2
        assert [e.kind for e in harness.entries()] == ["execution", "execution", "refusal"]
    finally:
        await harness.close()


async def test_an_unknown_tool_is_refused_and_journaled(harness: FakeHarness) -> None:
    result = await harness.execute("teleport", {}, causal_id="c")
    assert (result.outcome, result.reason, result.boundary) == (
        "refused",
        "unknown_tool",
        EffectBoundary.PRE_EFFECT_REFUSAL,
    )
    assert [e.kind for e in harness.entries()] == ["refusal"]
    assert AGENT.tenant_id == harness.entries()[0].tenant_id

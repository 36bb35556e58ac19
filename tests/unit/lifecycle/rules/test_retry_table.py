"""Every row of the DESIGN §4 retry table, through the SyscallHandler on the in-memory
store; the contract test (tests/integration/store/test_lifecycle_store_contract.py) holds
that store to PostgreSQL's answers, so the table is not run twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.errors import AttemptInFlight
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.fakelifecycle import FakeHarness as Harness
from tests.support.fakelifecycle import make_fake_harness

# The unsafe tool runs without consent here, so the table is seen on its own.
NO_CONSENT = PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    built = await make_fake_harness(policy=NO_CONSENT)
    try:
        yield built
    finally:
        await built.close()


async def test_no_earlier_attempt_gets_normal_admission(harness: Harness) -> None:
    result = await harness.execute("append", {"line": "a"})
    assert (result.outcome, result.attempt) == ("executed", 1)
    assert harness.tools["append"].calls == 1


async def test_a_completed_attempt_is_answered_from_the_journal_and_nothing_runs(
    harness: Harness,
) -> None:
    first = await harness.execute("append", {"line": "a"}, causal_id="c")
    again = await harness.execute("append", {"line": "a"}, causal_id="c")

    assert again.outcome == "deduplicated"
    assert again.boundary is EffectBoundary.EFFECT_COMPLETED
    assert again.result == first.result
    assert again.journal_position == first.journal_position
    assert again.receipt == first.receipt
    assert harness.tools["append"].calls == 1
    assert harness.capability_states(first.idempotency_key) == ["CONSUMED"]


async def test_a_refused_attempt_is_admitted_afresh_with_the_same_key(harness: Harness) -> None:
    # The same deployment before a policy change: another process, same database.
    denying = await make_fake_harness(
        store=harness.store.opened_again(),
        clock=harness.clock,
        tools=harness.tools,
        policy=PolicyConfig(default=TenantRules(deny_tools=["write"])),
        instance_id="before-the-change",
    )
    try:
        refused = await denying.execute(
            "write", {"text": "x"}, causal_id="c", run_id=harness.run_id
        )
    finally:
        await denying.close()
    assert (refused.outcome, refused.reason) == ("refused", "policy_denied")

    retried = await harness.execute("write", {"text": "x"}, causal_id="c")

    assert (retried.outcome, retried.attempt) == ("executed", 2)
    assert retried.idempotency_key == refused.idempotency_key
    assert harness.capability_states(retried.idempotency_key) == ["CONSUMED"]


async def test_an_attempt_that_did_not_start_gets_a_fresh_capability(harness: Harness) -> None:
    harness.tools["append"].then_fail(effect_started=False, retryable=False)
    first = await harness.execute("append", {"line": "a"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_NOT_STARTED

    second = await harness.execute("append", {"line": "a"}, causal_id="c")

    assert (second.boundary, second.attempt) == (EffectBoundary.EFFECT_COMPLETED, 2)
    assert harness.capability_states(first.idempotency_key) == ["CONSUMED", "CONSUMED"]
    assert harness.tools["append"].calls == 2


async def test_a_failure_with_retry_advice_gets_a_fresh_capability(harness: Harness) -> None:
    harness.tools["write"].then_fail(effect_started=True, retryable=True)
    first = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_FAILED
    assert first.problem is not None
    assert first.problem["retryable"] is True

    second = await harness.execute("write", {"text": "x"}, causal_id="c")

    assert (second.outcome, second.attempt) == ("executed", 2)
    assert second.boundary is EffectBoundary.EFFECT_COMPLETED


async def test_a_failure_without_retry_advice_is_refused_retry_not_advised(
    harness: Harness,
) -> None:
    harness.tools["write"].then_fail(effect_started=True, retryable=False)
    first = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_FAILED

    second = await harness.execute("write", {"text": "x"}, causal_id="c")
    third = await harness.execute("write", {"text": "x"}, causal_id="c")

    for refused in (second, third):
        assert (refused.outcome, refused.reason) == ("refused", "retry_not_advised")
        assert refused.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
    assert harness.tools["write"].calls == 1
    assert harness.capability_states(first.idempotency_key) == ["CONSUMED"]


async def test_an_uncertain_outcome_of_an_unsafe_tool_is_never_retried(harness: Harness) -> None:
    harness.tools["append"].then_fail(effect_started=None, retryable=False)
    first = await harness.execute("append", {"line": "a"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN

    again = await harness.execute("append", {"line": "a"}, causal_id="c")

    assert (again.outcome, again.reason) == ("refused", "retry_prohibited_uncertain")
    assert harness.tools["append"].calls == 1


async def test_an_uncertain_outcome_of_an_idempotent_tool_gets_a_fresh_capability(
    harness: Harness,
) -> None:
    harness.tools["write"].then_fail(effect_started=None, retryable=False)
    first = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN

    again = await harness.execute("write", {"text": "x"}, causal_id="c")

    assert (again.outcome, again.attempt) == ("executed", 2)
    assert harness.tools["write"].calls == 2


async def test_a_started_effect_of_an_unsafe_tool_is_never_retried(harness: Harness) -> None:
    # The tool reports its start, then the call is cut off: EFFECT_STARTED.
    running = harness.tools["append"].then_block(report_start=True)
    call = asyncio.create_task(harness.execute("append", {"line": "a"}, causal_id="c"))
    await running.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await harness.lifecycle.handler.drain(5.0)

    again = await harness.execute("append", {"line": "a"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1
    assert [e.boundary for e in harness.entries() if e.attempt == 1] == ["EFFECT_STARTED"]


async def test_an_attempt_in_flight_refuses_a_second_one(harness: Harness) -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    async def slow(invocation: ToolInvocation) -> ToolResult:
        started.set()
        await gate.wait()
        return ToolResult.ok("done")

    harness.tools["write"].then(slow)
    running = asyncio.create_task(harness.execute("write", {"text": "x"}, causal_id="c"))
    await started.wait()

    with pytest.raises(AttemptInFlight):
        await harness.execute("write", {"text": "x"}, causal_id="c")

    gate.set()
    assert (await running).outcome == "executed"
    assert harness.tools["write"].calls == 1


async def test_one_causal_id_names_one_decision_for_ever(harness: Harness) -> None:
    await harness.execute("write", {"text": "x"}, causal_id="c")

    other_payload = await harness.execute("write", {"text": "y"}, causal_id="c")
    other_tool = await harness.execute("read", {"text": "x"}, causal_id="c")

    for refused in (other_payload, other_tool):
        assert (refused.outcome, refused.reason) == ("refused", "causal_id_conflict")
        assert refused.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
        assert refused.journal_position is not None
    assert harness.tools["write"].calls == 1
    assert harness.tools["read"].calls == 0

"""Recovery (DESIGN §6) on the in-memory store: what a crashed process left is settled
exactly once, never run again, and a live process's calls are never touched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.lifecycle.lease import LeaseNotHeld
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.recovery import RecoverySweeper
from tests.support.fakelifecycle import FakeHarness, crash_during_dispatch, make_fake_harness
from tests.support.lifecycle import AGENT

NO_CONSENT = PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))


@pytest.fixture
async def harness() -> AsyncIterator[FakeHarness]:
    built = await make_fake_harness(policy=NO_CONSENT)
    try:
        yield built
    finally:
        await built.close()


def sweeper(harness: FakeHarness) -> RecoverySweeper:
    return RecoverySweeper(harness.store, harness.clock)


async def test_a_crashed_attempt_is_recovered_as_unknown_and_the_run_flagged(
    harness: FakeHarness,
) -> None:
    key = await crash_during_dispatch(harness, "append", {"line": "c"}, causal_id="c")
    assert harness.in_flight() == ["c"]

    settled = await sweeper(harness).sweep()

    assert [(s.causal_id, s.boundary) for s in settled] == [
        ("c", EffectBoundary.EFFECT_STATE_UNKNOWN)
    ]
    assert harness.in_flight() == []
    assert harness.store.tables.runs[(AGENT.tenant_id, harness.run_id)].audit_incomplete
    assert [(e.kind, e.boundary, e.idempotency_key) for e in harness.entries()] == [
        ("recovery", "EFFECT_STATE_UNKNOWN", key)
    ]
    again = await harness.execute("append", {"line": "c"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok


async def test_an_idempotent_tool_recovered_as_unknown_may_run_again(
    harness: FakeHarness,
) -> None:
    await crash_during_dispatch(harness, "write", {"text": "c"}, causal_id="c")
    await sweeper(harness).sweep()
    again = await harness.execute("write", {"text": "c"}, causal_id="c")
    assert (again.outcome, again.attempt) == ("executed", 2)


async def test_a_crash_after_the_tool_reported_its_start_is_recovered_as_started(
    harness: FakeHarness,
) -> None:
    await crash_during_dispatch(harness, "append", {"line": "c"}, causal_id="c", report_start=True)
    [attempt] = harness.store.tables.attempts.values()
    assert attempt.started_at is not None

    settled = await sweeper(harness).sweep()

    assert [s.boundary for s in settled] == [EffectBoundary.EFFECT_STARTED]
    again = await harness.execute("append", {"line": "c"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1


async def test_a_live_process_keeps_its_call_through_a_concurrent_sweep(
    harness: FakeHarness,
) -> None:
    running = harness.tools["append"].then_sleep(0.05)
    call = asyncio.create_task(harness.execute("append", {"line": "slow"}, causal_id="slow"))
    await running.wait()
    other = await make_fake_harness(
        store=harness.store.opened_again(),
        tools=harness.tools,
        clock=harness.clock,
        instance_id="other",
    )
    try:
        swept = [*(await other.lifecycle.sweeper.sweep()), *(await sweeper(harness).sweep())]
    finally:
        await other.close()
    assert swept == []
    result = await call
    assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert not result.audit_incomplete
    assert [e.kind for e in harness.entries()] == ["execution"]


async def test_concurrent_sweepers_settle_each_attempt_exactly_once(harness: FakeHarness) -> None:
    for n in range(3):
        await crash_during_dispatch(harness, "write", {"text": str(n)}, causal_id=f"c{n}")
    results = await asyncio.gather(*(sweeper(harness).sweep() for _ in range(4)))
    assert sorted(s.causal_id for found in results for s in found) == ["c0", "c1", "c2"]
    assert [e.kind for e in harness.entries()] == ["recovery"] * 3


async def test_a_process_without_a_lease_admits_nothing() -> None:
    harness = await make_fake_harness(claim_lease=False)
    try:
        with pytest.raises(LeaseNotHeld):
            await harness.execute("read", {"n": 1})
        assert harness.entries() == []
    finally:
        await harness.close()


async def test_a_cancelled_call_is_journaled_not_left_in_flight(harness: FakeHarness) -> None:
    running = harness.tools["write"].then_block(report_start=True)
    call = asyncio.create_task(harness.execute("write", {"text": "x"}, causal_id="c"))
    await running.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await harness.handler.drain(5.0)
    assert harness.in_flight() == []
    assert [(e.kind, e.boundary) for e in harness.entries()] == [("execution", "EFFECT_STARTED")]

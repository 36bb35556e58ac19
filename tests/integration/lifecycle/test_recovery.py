"""Recovery settles what a crash left, exactly once, and never runs a tool; it never
touches a live process's calls (DESIGN §6)."""

from __future__ import annotations

import asyncio

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.lifecycle.errors import ShuttingDown
from arvis.lifecycle.lease import InstanceLease, LeaseNotHeld
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, Harness, crash_during_dispatch, make_harness


def sweeper(harness: Harness) -> RecoverySweeper:
    return RecoverySweeper(harness.store.ops, harness.clock)


@pytest.fixture
async def harness(database_url: str):  # type: ignore[no-untyped-def]
    built = await make_harness(
        database_url, policy=PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))
    )
    try:
        yield built
    finally:
        await built.close()


async def test_a_consumed_capability_is_recovered_as_unknown_and_the_run_flagged(
    harness: Harness,
) -> None:
    key = await crash_during_dispatch(harness, "append", {"line": "c"}, causal_id="c")
    assert harness.in_flight() == ["c"]

    settled = await sweeper(harness).sweep()

    assert [(s.causal_id, s.boundary) for s in settled] == [
        ("c", EffectBoundary.EFFECT_STATE_UNKNOWN)
    ]
    assert harness.in_flight() == []
    assert harness.sql("SELECT audit_incomplete FROM runs WHERE run_id = %s", harness.run_id) == [
        (True,)
    ]
    entry = harness.sql(
        "SELECT kind, boundary FROM journal_entries WHERE idempotency_key = %s", key
    )
    assert entry == [("recovery", "EFFECT_STATE_UNKNOWN")]
    again = await harness.execute("append", {"line": "c"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok


async def test_an_idempotent_tool_recovered_as_unknown_may_run_again(harness: Harness) -> None:
    await crash_during_dispatch(harness, "write", {"text": "c"}, causal_id="c")
    await sweeper(harness).sweep()
    again = await harness.execute("write", {"text": "c"}, causal_id="c")
    assert (again.outcome, again.attempt) == ("executed", 2)


async def test_a_crash_after_the_tool_reported_its_start_is_recovered_as_started(
    harness: Harness,
) -> None:
    key = await crash_during_dispatch(
        harness, "append", {"line": "c"}, causal_id="c", report_start=True
    )
    marked = harness.sql(
        "SELECT started_at IS NOT NULL FROM attempts WHERE idempotency_key = %s", key
    )
    assert marked == [(True,)]

    settled = await sweeper(harness).sweep()

    assert [s.boundary for s in settled] == [EffectBoundary.EFFECT_STARTED]
    entry = harness.sql(
        "SELECT kind, boundary FROM journal_entries WHERE idempotency_key = %s", key
    )
    assert entry == [("recovery", "EFFECT_STARTED")]
    # Started and unobserved is uncertain: an unsafe tool is never run again.
    again = await harness.execute("append", {"line": "c"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1


async def test_a_live_process_keeps_its_in_flight_call_through_a_concurrent_sweep(
    harness: Harness,
) -> None:
    running = harness.tools["append"].then_sleep(0.5)
    call = asyncio.create_task(harness.execute("append", {"line": "slow"}, causal_id="slow"))
    await running.wait()

    # Another instance's sweeper, and `arvis recover`'s, run while the call is in flight.
    other = await make_harness(harness.url, tools=harness.tools, instance_id="other")
    try:
        swept = [
            *(await other.lifecycle.sweeper.sweep()),
            *(await sweeper(harness).sweep()),
        ]
    finally:
        await other.close()
    assert [s for s in swept if s.run_id == harness.run_id] == []

    result = await call
    assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert result.result == {"slept": 0.5}
    assert not result.audit_incomplete
    assert harness.sql(
        "SELECT kind FROM journal_entries WHERE run_id = %s AND causal_id = 'slow'",
        harness.run_id,
    ) == [("execution",)]


async def test_a_process_without_a_lease_admits_nothing(database_url: str) -> None:
    unleased = await make_harness(database_url, claim_lease=False)
    try:
        with pytest.raises(LeaseNotHeld):
            await unleased.execute("read", {})
        assert unleased.sql(
            "SELECT count(*) FROM journal_entries WHERE run_id = %s", unleased.run_id
        ) == [(0,)]
    finally:
        await unleased.close()


async def test_a_process_whose_lease_lapsed_stops_admitting(database_url: str) -> None:
    lapsing = await make_harness(database_url, lease_ttl_s=1.0, instance_id="lapsing")
    try:
        assert (await lapsing.execute("read", {})).outcome == "executed"
        await asyncio.sleep(1.0)  # no heartbeat: the lease's ttl passes for real
        with pytest.raises(LeaseNotHeld):
            await lapsing.execute("read", {})
    finally:
        await lapsing.close()


async def test_workers_of_one_instance_id_hold_distinct_lease_names(harness: Harness) -> None:
    first = InstanceLease(harness.store.ops, "shared-id", ttl_s=60)
    second = InstanceLease(harness.store.ops, "shared-id", ttl_s=60)
    assert await first.claim() == "shared-id/1"
    assert await second.claim() == "shared-id/2"

    # A restarted worker never takes a live sibling's name...
    restarted = InstanceLease(harness.store.ops, "shared-id", ttl_s=60)
    assert await restarted.claim() == "shared-id/3"
    # ...and a name freed by a stopping worker is taken again.
    await first.release()
    again = InstanceLease(harness.store.ops, "shared-id", ttl_s=60)
    assert await again.claim() == "shared-id/1"
    # A holder whose name was taken over claims another on its next beat.
    stale = InstanceLease(harness.store.ops, "other-id", ttl_s=60)
    await stale.claim()
    harness.sql("UPDATE instance_leases SET expires_at = now() WHERE instance_id = 'other-id/1'")
    usurper = InstanceLease(harness.store.ops, "other-id", ttl_s=60)
    assert await usurper.claim() == "other-id/1"
    await stale.beat()
    assert stale.name == "other-id/2"
    for lease in (second, restarted, again, stale, usurper):
        await lease.release()


async def test_a_cancelled_call_is_journaled_not_left_in_flight(harness: Harness) -> None:
    running = harness.tools["append"].then_block(report_start=True)
    call = asyncio.create_task(harness.execute("append", {"line": "x"}, causal_id="x"))
    await running.wait()

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await harness.lifecycle.handler.drain(5.0)

    rows = harness.sql(
        "SELECT kind, boundary FROM journal_entries WHERE run_id = %s AND causal_id = 'x'",
        harness.run_id,
    )
    assert rows == [("execution", "EFFECT_STARTED")]
    assert harness.in_flight() == []
    # Not stuck in flight: the next post is answered by the retry table.
    again = await harness.execute("append", {"line": "x"}, causal_id="x")
    assert again.reason == "retry_prohibited_uncertain"


async def test_concurrent_sweepers_settle_each_intent_exactly_once(harness: Harness) -> None:
    for n in range(6):
        await crash_during_dispatch(harness, "append", {"line": f"c{n}"}, causal_id=f"c{n}")

    results = await asyncio.gather(*(sweeper(harness).sweep() for _ in range(3)))

    settled = [s.intent_id for batch in results for s in batch]
    assert len(settled) == len(set(settled)) == 6
    assert harness.sql(
        "SELECT count(*) FROM journal_entries WHERE kind = 'recovery' AND run_id = %s",
        harness.run_id,
    ) == [(6,)]


async def test_a_consent_is_consumed_by_an_unknown_recovery(database_url: str) -> None:
    harness = await make_harness(database_url)
    try:
        pending = await harness.execute("append", {"line": "c"}, causal_id="c")
        assert pending.confirmation is not None
        await harness.approve(pending.confirmation.id)
        await crash_during_dispatch(harness, "append", {"line": "c"}, causal_id="c")
        assert harness.confirmation_state(pending.confirmation.id) == "RESERVED"

        await sweeper(harness).sweep()

        assert harness.confirmation_state(pending.confirmation.id) == "CONSUMED"
    finally:
        await harness.close()


async def test_a_stopping_handler_refuses_new_syscalls_and_drains_in_flight_ones(
    harness: Harness,
) -> None:
    release = asyncio.Event()

    async def slow(invocation: ToolInvocation) -> ToolResult:
        await release.wait()
        return ToolResult.ok("finished")

    harness.tools["write"].then(slow)
    running = asyncio.create_task(harness.execute("write", {"text": "1"}, causal_id="slow"))
    while harness.tools["write"].calls == 0:  # noqa: ASYNC110 - the tool is the signal
        await asyncio.sleep(0.01)
    handler = harness.lifecycle.handler
    handler.stop_admitting()

    with pytest.raises(ShuttingDown):
        await harness.execute("read", {})
    assert not await handler.drain(timeout_s=0.05)
    release.set()
    assert await handler.drain(timeout_s=5)
    assert (await running).result == "finished"
    assert harness.in_flight() == []

"""Recovery settles what a crash left, exactly once, and never runs a tool."""

from __future__ import annotations

import asyncio

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.lifecycle.errors import ShuttingDown
from arvis.lifecycle.policy import PolicyConfig, TenantRules
from arvis.lifecycle.recovery import InstanceLease, RecoverySweeper
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, Harness, make_harness


async def crash_during_dispatch(harness: Harness, tool: str, causal_id: str) -> str:
    """Start a syscall whose tool never returns, then abandon it as a crash would."""
    started = asyncio.Event()

    async def hang(invocation: ToolInvocation) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    harness.tools[tool].then(hang)
    payload = {"text": causal_id} if tool == "write" else {"line": causal_id}
    task = asyncio.create_task(harness.execute(tool, payload, causal_id=causal_id))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    key = harness.sql(
        "SELECT idempotency_key FROM intents WHERE run_id = %s AND causal_id = %s",
        harness.run_id,
        causal_id,
    )
    return str(key[0][0])


def sweeper(harness: Harness) -> RecoverySweeper:
    return RecoverySweeper(harness.store, harness.clock)


@pytest.fixture
async def harness(database_url: str):  # type: ignore[no-untyped-def]
    built = await make_harness(
        database_url, policy=PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))
    )
    try:
        yield built
    finally:
        await built.store.close()


async def test_a_consumed_capability_is_recovered_as_unknown_and_the_run_flagged(
    harness: Harness,
) -> None:
    key = await crash_during_dispatch(harness, "append", "c")
    assert harness.sql("SELECT settled FROM intents WHERE idempotency_key = %s", key) == [(False,)]

    settled = await sweeper(harness).sweep()

    assert [(s.causal_id, s.boundary) for s in settled] == [
        ("c", EffectBoundary.EFFECT_STATE_UNKNOWN)
    ]
    assert harness.sql("SELECT settled FROM intents WHERE idempotency_key = %s", key) == [(True,)]
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
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok


async def test_an_idempotent_tool_recovered_as_unknown_may_run_again(harness: Harness) -> None:
    await crash_during_dispatch(harness, "write", "c")
    await sweeper(harness).sweep()
    again = await harness.execute("write", {"text": "c"}, causal_id="c")
    assert (again.outcome, again.attempt) == ("executed", 2)


async def test_a_never_consumed_capability_is_revoked_and_recovered_as_not_started(
    harness: Harness,
) -> None:
    key = await crash_during_dispatch(harness, "append", "c")
    # As if the crash came between activation and consumption.
    harness.sql("UPDATE capabilities SET state = 'ACTIVE' WHERE idempotency_key = %s", key)

    settled = await sweeper(harness).sweep()

    assert [s.boundary for s in settled] == [EffectBoundary.EFFECT_NOT_STARTED]
    assert harness.capability_states(key) == ["REVOKED"]
    again = await harness.execute("append", {"line": "c"}, causal_id="c")
    assert (again.outcome, again.attempt) == ("executed", 2)


async def test_intents_of_a_live_instance_are_left_alone(harness: Harness) -> None:
    await crash_during_dispatch(harness, "append", "c")
    lease = InstanceLease(harness.store, "test-instance", ttl_s=60)
    await lease.hold()

    assert await sweeper(harness).sweep() == []

    await lease.release()
    assert len(await sweeper(harness).sweep()) == 1


async def test_a_restarted_instance_settles_its_own_earlier_intents(harness: Harness) -> None:
    await crash_during_dispatch(harness, "append", "c")
    lease = InstanceLease(harness.store, "test-instance", ttl_s=60)
    await lease.hold()
    try:
        settled = await sweeper(harness).sweep(owner="test-instance")
        assert len(settled) == 1
    finally:
        await lease.release()


async def test_concurrent_sweepers_settle_each_intent_exactly_once(harness: Harness) -> None:
    for n in range(6):
        await crash_during_dispatch(harness, "append", f"c{n}")

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
        await crash_during_dispatch(harness, "append", "c")
        assert harness.confirmation_state(pending.confirmation.id) == "RESERVED"

        await sweeper(harness).sweep()

        assert harness.confirmation_state(pending.confirmation.id) == "CONSUMED"
    finally:
        await harness.store.close()


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
    assert harness.sql(
        "SELECT count(*) FROM intents WHERE NOT settled AND run_id = %s", harness.run_id
    ) == [(0,)]

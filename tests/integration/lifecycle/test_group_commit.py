"""Group commit (issue 25) through the SyscallHandler on a real PostgreSQL: the calls of
a tenant that queue while its previous statement is in flight are admitted (and
journaled) by one statement and one commit, each with its own answer.

A batch is made deterministic by holding a run's lock from outside: a lone call of
that run is in flight (blocked in the database) while the others queue behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
import pytest

from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.errors import RunOfAnotherPrincipal
from arvis.lifecycle.policy.budgets import BudgetConfig
from arvis.lifecycle.results import SyscallResult
from arvis.store.batching import GroupCommit
from arvis.store.engine import libpq_url
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, Harness, make_harness
from tests.support.postgres import run_lock_held
from tests.support.rules import OTHER_AGENT

TENANT = AGENT.tenant_id


@pytest.fixture
async def budgeted(database_url: str) -> AsyncIterator[Harness]:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute("DELETE FROM budget_usage")
    writes = BudgetConfig.model_validate(
        {"name": "writes", "per": "1d", "limit": 1, "tools": ["write"]}
    )
    harness = await make_harness(database_url, budgets=(writes,), instance_id="batch-budget")
    try:
        yield harness
    finally:
        await harness.close()


def run_held(harness: Harness, run_id: str) -> AbstractAsyncContextManager[None]:
    """The run's lock (arvis_bind's) held by another transaction until the block ends."""
    return run_lock_held(harness.url, TENANT, run_id)


async def until(ready: Callable[[], bool]) -> None:
    while not ready():  # noqa: ASYNC110 - the batcher's queue is the signal
        await asyncio.sleep(0.005)


async def queued(commit: GroupCommit[Any], count: int) -> None:
    """Until ``count`` items of the tenant wait behind the statement in flight."""
    await until(lambda: commit.waiting(TENANT) >= count)


def outcome(answer: SyscallResult | BaseException) -> str:
    """A call's outcome and reason, or the name of what it raised."""
    if isinstance(answer, BaseException):
        return type(answer).__name__
    return answer.outcome if answer.reason is None else f"{answer.outcome}:{answer.reason}"


async def behind_a_held_admission(
    harness: Harness, calls: list[Callable[[], Awaitable[SyscallResult]]]
) -> tuple[SyscallResult, list[SyscallResult | BaseException]]:
    """Run ``calls`` while a lone admission is in flight: they queue, then go as one
    batch. Answers the lone call's result and theirs (an exception as a value)."""
    admissions = harness.store.ops.admissions
    async with run_held(harness, "held"):
        lone = asyncio.ensure_future(harness.execute("read", {"n": 0}, run_id="held"))
        await until(lambda: bool(admissions.sizes))  # the lone one is sent, and blocked
        rest = [asyncio.ensure_future(call()) for call in calls]
        await queued(admissions, len(calls))
    answers = await asyncio.gather(*rest, return_exceptions=True)
    return await lone, answers


async def test_calls_queued_behind_a_commit_are_admitted_by_one_statement(
    harness: Harness,
) -> None:
    calls = [
        lambda n=n: harness.execute("write", {"text": f"w{n}"}, run_id=f"r{n}")  # type: ignore[misc]
        for n in range(6)
    ]
    lone, answers = await behind_a_held_admission(harness, calls)
    assert lone.outcome == "executed"
    assert [outcome(a) for a in answers] == ["executed"] * 6
    assert harness.store.ops.admissions.sizes == {1: 1, 6: 1}
    assert harness.tools["write"].calls == 6
    for n in range(6):
        report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId(f"r{n}"))
        assert report.ok
    assert harness.in_flight() == []


async def test_a_lone_call_is_a_batch_of_one(harness: Harness) -> None:
    for n in range(3):
        assert (await harness.execute("read", {"n": n})).outcome == "executed"
    assert harness.store.ops.admissions.sizes == {1: 3}
    assert harness.store.ops.journals.sizes == {1: 3}


async def test_a_batched_call_runs_only_once_its_own_admission_is_committed(
    harness: Harness,
) -> None:
    seen: list[int] = []

    async def look(invocation: ToolInvocation) -> ToolResult:
        # Another connection sees the attempt: its admission committed before dispatch.
        rows = harness.sql(
            "SELECT count(*) FROM attempts WHERE tenant_id = %s AND idempotency_key = %s",
            TENANT,
            invocation.idempotency_key,
        )
        seen.append(rows[0][0])
        return ToolResult.ok("looked")

    for _ in range(4):
        harness.tools["write"].then(look)
    calls = [
        lambda n=n: harness.execute("write", {"text": f"l{n}"}, run_id=f"look{n}")  # type: ignore[misc]
        for n in range(4)
    ]
    _, answers = await behind_a_held_admission(harness, calls)
    assert [outcome(a) for a in answers] == ["executed"] * 4
    assert seen == [1, 1, 1, 1]
    assert harness.store.ops.admissions.sizes[4] == 1


async def test_a_refused_conflicting_or_stale_item_never_fails_its_batch_mates(
    harness: Harness,
) -> None:
    done = await harness.execute("read", {"n": 1}, run_id="mine", causal_id="done")
    assert done.outcome == "executed"
    calls = [
        lambda: harness.execute("write", {"text": "a"}, run_id="plain-a"),
        # The same decision again: 'stale' on the first round, then its recorded result.
        lambda: harness.execute("read", {"n": 1}, run_id="mine", causal_id="done"),
        # Another decision under a taken causal id: refused causal_id_conflict.
        lambda: harness.execute("read", {"n": 2}, run_id="mine", causal_id="done"),
        # Another principal's run: refused, nothing written.
        lambda: harness.execute("read", {"n": 3}, run_id="mine", identity=OTHER_AGENT),
        lambda: harness.execute("write", {"text": "b"}, run_id="plain-b"),
    ]
    _, answers = await behind_a_held_admission(harness, calls)
    assert [outcome(a) for a in answers] == [
        "executed",
        "deduplicated",
        "refused:causal_id_conflict",
        RunOfAnotherPrincipal.__name__,
        "executed",
    ]
    assert harness.store.ops.admissions.sizes[5] == 1
    assert harness.tools["write"].calls == 2


async def test_a_budget_refusal_in_a_batch_is_that_items_answer_alone(budgeted: Harness) -> None:
    harness = budgeted
    assert (await harness.execute("write", {"text": "spends"}, run_id="spent")).outcome == (
        "executed"
    )
    calls = [
        lambda: harness.execute("read", {"n": 1}, run_id="free-1"),
        lambda: harness.execute("write", {"text": "over"}, run_id="over"),
        lambda: harness.execute("read", {"n": 2}, run_id="free-2"),
    ]
    _, answers = await behind_a_held_admission(harness, calls)
    assert [outcome(a) for a in answers] == ["executed", "refused:budget_exceeded", "executed"]
    assert harness.store.ops.admissions.sizes[3] == 1
    assert harness.sql("SELECT used FROM budget_usage WHERE budget = 'writes'") == [(1,)]
    assert harness.tools["write"].calls == 1


async def test_two_charged_calls_never_share_a_batch(budgeted: Harness) -> None:
    harness = budgeted
    calls = [
        lambda: harness.execute("write", {"text": "one"}, run_id="charged-1"),
        lambda: harness.execute("read", {"n": 1}, run_id="free"),
        lambda: harness.execute("write", {"text": "two"}, run_id="charged-2"),
    ]
    _, answers = await behind_a_held_admission(harness, calls)
    assert [outcome(a) for a in answers] == ["executed", "executed", "refused:budget_exceeded"]
    # The batch ends before the second charged call, which goes next, in order.
    assert harness.store.ops.admissions.sizes == {1: 2, 2: 1}


async def test_two_calls_of_one_run_keep_their_order_on_its_one_chain(harness: Harness) -> None:
    calls = [
        lambda n=n: harness.execute("read", {"n": n}, run_id="ordered", causal_id=f"o{n}")  # type: ignore[misc]
        for n in range(3)
    ]
    _, answers = await behind_a_held_admission(harness, calls)
    assert [outcome(a) for a in answers] == ["executed"] * 3
    receipts = harness.sql(
        "SELECT causal_id FROM journal_entries WHERE run_id = 'ordered'"
        " ORDER BY (body::jsonb -> 'receipt' ->> 'position')::bigint"
    )
    assert receipts == [("o0",), ("o1",), ("o2",)]
    report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId("ordered"))
    assert report.ok


async def test_journal_steps_queued_behind_a_commit_append_by_one_statement(
    harness: Harness,
) -> None:
    journals = harness.store.ops.journals
    running = harness.tools["write"].then_block()
    held = asyncio.ensure_future(harness.execute("write", {"text": "h"}, run_id="held"))
    await running.wait()
    async with run_held(harness, "held"):
        # The held call's journal step goes alone and waits for the run's lock.
        held.cancel()
        await until(lambda: bool(journals.sizes))
        rest = [
            asyncio.ensure_future(harness.execute("read", {"n": n}, run_id="chain"))
            for n in range(3)
        ]
        await queued(journals, 3)
    answers = await asyncio.gather(*rest)
    assert [a.outcome for a in answers] == ["executed"] * 3
    assert journals.sizes[3] == 1
    positions = sorted(a.journal_position or 0 for a in answers)
    assert positions == [1, 2, 3]
    report = await harness.lifecycle.evidence.verify(TenantId(TENANT), RunId("chain"))
    assert report.ok
    with pytest.raises(asyncio.CancelledError):
        await held
    await harness.lifecycle.handler.drain(5.0)
    assert harness.in_flight() == []

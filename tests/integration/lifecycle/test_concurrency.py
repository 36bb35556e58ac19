"""Many handlers racing for one decision: exactly one execution."""

from __future__ import annotations

import asyncio

from arvis.domain.ids import RunId
from arvis.lifecycle.errors import AttemptInFlight
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, Harness


async def test_32_concurrent_calls_of_one_decision_execute_it_exactly_once(
    harness: Harness,
) -> None:
    async def slow(invocation: ToolInvocation) -> ToolResult:
        await asyncio.sleep(0.05)
        return ToolResult.ok("written")

    harness.tools["write"].then(slow)

    async def call() -> str:
        try:
            result = await harness.execute("write", {"text": "once"}, causal_id="race")
        except AttemptInFlight:
            return "attempt_in_flight"
        return result.outcome

    outcomes = await asyncio.gather(*(call() for _ in range(32)))

    assert outcomes.count("executed") == 1
    assert set(outcomes) <= {"executed", "deduplicated", "attempt_in_flight"}
    assert harness.tools["write"].calls == 1
    rows = harness.sql(
        "SELECT count(*) FROM journal_entries WHERE run_id = %s AND kind = 'execution'",
        harness.run_id,
    )
    assert rows == [(1,)]
    assert harness.in_flight() == []
    assert harness.sql(
        "SELECT count(*) FROM journal_entries WHERE run_id = %s", harness.run_id
    ) == [(1,)]


async def test_concurrent_decisions_of_one_run_form_one_unbroken_chain(harness: Harness) -> None:
    results = await asyncio.gather(
        *(harness.execute("read", {"n": n}, causal_id=f"c{n}") for n in range(20))
    )
    positions = sorted(r.journal_position or 0 for r in results)
    assert positions == list(range(1, 21))
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok

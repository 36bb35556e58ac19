"""EFFECT_STARTED through the lifecycle (DESIGN §1): known started, end not observed."""

from __future__ import annotations

import asyncio

from arvis.domain.boundary import EffectBoundary
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import Harness, make_harness


async def test_a_deadline_after_the_start_report_is_journaled_started(database_url: str) -> None:
    harness = await make_harness(database_url, tool_timeout_s=0.2)
    try:
        await _deadline_after_start(harness)
    finally:
        await harness.close()


async def _deadline_after_start(harness: Harness) -> None:
    tool = harness.tools["append"]

    async def start_then_hang(invocation: ToolInvocation) -> ToolResult:
        assert tool.reporter is not None
        await tool.reporter.effect_started(invocation.call_id)
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    tool.then(start_then_hang)
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)

    timed_out = await harness.execute("append", {"line": "x"}, causal_id="c")

    assert timed_out.boundary is EffectBoundary.EFFECT_STARTED
    assert timed_out.problem is not None
    assert timed_out.problem["code"] == "deadline_exceeded"
    row = harness.sql(
        "SELECT kind, boundary FROM journal_entries WHERE idempotency_key = %s"
        " AND attempt IS NOT NULL",
        timed_out.idempotency_key,
    )
    assert row == [("execution", "EFFECT_STARTED")]
    # Uncertain: an unsafe tool is not run again, and its consent is spent.
    again = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.confirmation_state(pending.confirmation.id) == "CONSUMED"
    assert tool.calls == 1

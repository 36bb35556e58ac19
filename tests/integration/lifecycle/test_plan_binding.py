"""Plans and decisions: every decision is decided under the current plan, and a decided
action stays decided across a plan change (DESIGN §10 "A decision belongs to its
principal"): its record, the retry table on the definition its attempt ran under, and
no second run of an attempt that may have taken effect under a changed definition."""

from __future__ import annotations

from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.results import SyscallResult
from tests.support.lifecycle import (
    Harness,
    ScriptedTool,
    make_harness,
    standard_tools,
    tool_definition,
)


def _changed_tools() -> dict[str, ScriptedTool]:
    """A new deployment: one tool added, one tool's definition changed."""
    tools = standard_tools()
    tools["extra"] = ScriptedTool(tool_definition("extra"))
    tools["write"] = ScriptedTool(
        tool_definition("write", schema={"type": "object", "description": "changed"})
    )
    return tools


async def _decide_before(before: Harness) -> str:
    """Decisions of every kind the retry table tells apart, under the first plan."""
    assert (await before.execute("read", {"n": 1}, causal_id="read")).outcome == "executed"
    assert (await before.execute("write", {"text": "a"}, causal_id="done")).outcome == "executed"
    before.tools["write"].then_fail(effect_started=True, retryable=True)
    failed = await before.execute("write", {"text": "b"}, causal_id="failed")
    assert failed.boundary is EffectBoundary.EFFECT_FAILED
    before.tools["write"].then_fail(effect_started=False, retryable=True)
    not_started = await before.execute("write", {"text": "c"}, causal_id="not-started")
    assert not_started.boundary is EffectBoundary.EFFECT_NOT_STARTED
    asked = await before.execute("append", {"line": "x"}, causal_id="unsafe")
    assert asked.confirmation is not None
    await before.approve(asked.confirmation.id)
    before.tools["append"].then_fail(effect_started=None, retryable=False)
    unknown = await before.execute("append", {"line": "x"}, causal_id="unsafe")
    assert unknown.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    return (await before.execute("write", {"text": "a"}, causal_id="done")).idempotency_key


async def test_a_plan_change_leaves_decided_actions_decided_and_new_ones_current(
    database_url: str,
) -> None:
    before = await make_harness(database_url)
    try:
        done_key = await _decide_before(before)
        run_id = before.run_id
        plan_p = before.lifecycle.plans.current.plan_id
    finally:
        await before.close()

    tools = _changed_tools()
    after = await make_harness(database_url, tools=tools)
    try:
        plan_p2 = after.lifecycle.plans.current.plan_id
        assert plan_p2 != plan_p

        async def again(tool: str, payload: dict[str, Any], causal: str) -> SyscallResult:
            return await after.execute(tool, payload, causal_id=causal, run_id=run_id)

        done = await again("write", {"text": "a"}, "done")
        unsafe = await again("append", {"line": "x"}, "unsafe")
        failed = await again("write", {"text": "b"}, "failed")
        not_started = await again("write", {"text": "c"}, "not-started")
        added = await again("extra", {}, "added")
        changed = await again("write", {"text": "new"}, "changed-new")
        unchanged = await again("read", {"n": 2}, "read-2")

        # Decided actions stay decided: the record, and the table's refusal.
        assert (done.outcome, done.idempotency_key) == ("deduplicated", done_key)
        assert (unsafe.outcome, unsafe.reason) == ("refused", "retry_prohibited_uncertain")
        # An attempt that may have taken effect is not run again under another definition.
        assert (failed.outcome, failed.reason) == ("refused", "plan_retired")
        assert failed.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
        assert failed.attempt is None  # not an attempt: the table still sees the failure
        # What provably never ran, and every new decision, runs under the current plan.
        assert (not_started.outcome, not_started.attempt) == ("executed", 2)
        assert added.outcome == "executed"
        assert changed.outcome == "executed"
        assert unchanged.outcome == "executed"
        assert tools["write"].calls == 2  # not-started and changed-new, never "failed"
        assert tools["append"].calls == 0
        again_failed = await again("write", {"text": "b"}, "failed")
        assert again_failed.reason == "plan_retired"

        assert after.sql("SELECT plan_id FROM runs WHERE run_id = %s", run_id) == [(plan_p,)]
        bodies = after.sql(
            "SELECT causal_id, body::jsonb ->> 'plan_id' FROM journal_entries"
            " WHERE run_id = %s AND kind = 'execution' AND causal_id IN ('added', 'read')",
            run_id,
        )
        assert dict(bodies) == {"read": plan_p, "added": plan_p2}
        stored = after.sql(
            "SELECT count(*) FROM tool_plans WHERE plan_id IN (%s, %s)", plan_p, plan_p2
        )
        assert stored == [(2,)]
    finally:
        await after.close()


async def test_a_plan_change_keeps_the_uncertainty_of_a_tool_that_left_the_plan(
    database_url: str,
) -> None:
    before = await make_harness(database_url)
    try:
        before.tools["write"].then_fail(effect_started=None, retryable=False)
        unknown = await before.execute("write", {"text": "x"}, causal_id="gone")
        assert unknown.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
        run_id = before.run_id
    finally:
        await before.close()

    tools = standard_tools()
    del tools["write"]
    after = await make_harness(database_url, tools=tools)
    try:
        gone = await after.execute("write", {"text": "x"}, causal_id="gone", run_id=run_id)
        assert (gone.outcome, gone.reason, gone.attempt) == ("refused", "plan_retired", None)
    finally:
        await after.close()

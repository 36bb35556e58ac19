"""A run is bound to the plan leased at its first syscall, for ever."""

from __future__ import annotations

from arvis.domain.boundary import EffectBoundary
from tests.support.lifecycle import ScriptedTool, make_harness, standard_tools, tool_definition


async def test_a_run_bound_to_plan_p_keeps_p_after_the_tool_set_changes(
    database_url: str,
) -> None:
    before = await make_harness(database_url)
    try:
        first = await before.execute("read", {"n": 1}, causal_id="a")
        assert first.outcome == "executed"
        run_id = before.run_id
        plan_p = before.lifecycle.plans.current.plan_id
    finally:
        await before.close()

    # A new deployment: one tool added, one tool's definition changed.
    tools = standard_tools()
    tools["extra"] = ScriptedTool(tool_definition("extra"))
    tools["write"] = ScriptedTool(
        tool_definition("write", schema={"type": "object", "description": "changed"})
    )
    after = await make_harness(database_url, tools=tools)
    try:
        plan_p2 = after.lifecycle.plans.current.plan_id
        assert plan_p2 != plan_p

        unchanged = await after.execute("read", {"n": 2}, causal_id="b", run_id=run_id)
        added = await after.execute("extra", {}, causal_id="c", run_id=run_id)
        changed = await after.execute("write", {"text": "x"}, causal_id="d", run_id=run_id)
        fresh = await after.execute("extra", {}, causal_id="e", run_id="a-new-run")

        assert unchanged.outcome == "executed"
        assert (added.outcome, added.reason) == ("refused", "unknown_tool")
        assert changed.boundary is EffectBoundary.EFFECT_NOT_STARTED
        assert changed.problem is not None
        assert changed.problem["code"] == "plan_retired"
        assert tools["write"].calls == 0
        assert fresh.outcome == "executed"
        bound = after.sql(
            "SELECT run_id, plan_id FROM runs WHERE run_id IN (%s, 'a-new-run') ORDER BY 1",
            run_id,
        )
        assert dict(bound) == {run_id: plan_p, "a-new-run": plan_p2}
        stored = after.sql(
            "SELECT count(*) FROM tool_plans WHERE plan_id IN (%s, %s)", plan_p, plan_p2
        )
        assert stored == [(2,)]
    finally:
        await after.close()

"""What ``arvis tools [--json]`` and ``GET /v1/tools`` show of a plan."""

from __future__ import annotations

from typing import Any

from arvis.domain.definitions import ToolDefinition
from arvis.tools.plans import ToolPlan


def describe_tool(definition: ToolDefinition) -> dict[str, Any]:
    """One tool as ARVIS shows it: what a model is told, and its governance metadata."""
    return {
        "name": definition.name,
        "description": definition.description,
        "input_schema": definition.input_schema,
        "effect": definition.effect.value,
        "replay_safety": definition.replay_safety.value,
        "capabilities": list(definition.capabilities),
        "fingerprint": definition.fingerprint,
    }


def describe_plan(plan: ToolPlan) -> list[dict[str, Any]]:
    """One row per tool, sorted by name, each naming the plan it belongs to."""
    return [
        {**describe_tool(definition), "plan_id": plan.plan_id}
        for definition in sorted(plan.definitions.values(), key=lambda d: d.name)
    ]

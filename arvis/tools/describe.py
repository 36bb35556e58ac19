"""What ``arvis tools [--json]`` and ``GET /v1/tools`` show of a plan."""

from __future__ import annotations

from typing import Any

from arvis.tools.plans import ToolPlan


def describe_plan(plan: ToolPlan) -> list[dict[str, Any]]:
    """One row per tool, sorted by name: governance metadata, fingerprint, plan id."""
    return [
        {
            "name": definition.name,
            "effect": definition.effect.value,
            "replay_safety": definition.replay_safety.value,
            "capabilities": list(definition.capabilities),
            "fingerprint": definition.fingerprint,
            "plan_id": plan.plan_id,
        }
        for definition in sorted(plan.definitions.values(), key=lambda d: d.name)
    ]

"""A declared tool factory for tests that need a call to stay in flight a while.

``arvis.toml``: ``[tools] factories = ["tests.support.slowtools:make_tools"]``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.registry import ToolHost

SLOW_WRITE = ToolDefinition(
    name="slow.write",
    description="Report the start, sleep `seconds`, then complete (a test tool).",
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 60}},
        "required": ["seconds"],
        "additionalProperties": False,
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.IDEMPOTENT,
)


class SlowWrite:
    definition = SLOW_WRITE
    name = SLOW_WRITE.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        seconds = float(invocation.payload.value["seconds"])
        await reporter.effect_started(invocation.call_id)
        await asyncio.sleep(seconds)
        return ToolResult.ok({"slept": seconds})


def make_tools(host: ToolHost) -> list[Tool]:
    return [SlowWrite()]


GATED_ONCE = ToolDefinition(
    name="gated.once",
    description="Report the start, wait until the file `gate` exists, then complete (a test tool).",
    input_schema={
        "type": "object",
        "properties": {"gate": {"type": "string", "minLength": 1}},
        "required": ["gate"],
        "additionalProperties": False,
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.UNSAFE,
)


class GatedOnce:
    """An unsafe call that stays in flight until the test lets it end (no timing)."""

    definition = GATED_ONCE
    name = GATED_ONCE.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        gate = Path(str(invocation.payload.value["gate"]))
        await reporter.effect_started(invocation.call_id)
        for _ in range(60 * 20):
            if await asyncio.to_thread(gate.exists):
                return ToolResult.ok({"gate": str(gate)})
            await asyncio.sleep(0.05)
        return ToolResult.fail("gate_never_opened", "the test never opened the gate")


def make_gated_tools(host: ToolHost) -> list[Tool]:
    """``[tools] factories = ["tests.support.slowtools:make_gated_tools"]``: ``gated.once``."""
    return [GatedOnce()]

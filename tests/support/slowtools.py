"""A declared tool factory for tests that need a call to stay in flight a while.

``arvis.toml``: ``[tools] factories = ["tests.support.slowtools:make_tools"]``.
"""

from __future__ import annotations

import asyncio

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

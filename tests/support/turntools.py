"""A declared tool for the per-turn tests: an unsafe append that lingers after its effect.

``arvis.toml``: ``CONFIG`` below. ``turn.append`` reports its start, appends one line to a
file of the sandbox (flushed to disk), then lingers ``linger_s`` before it completes, so a
process killed mid-turn is often killed between the effect and its journal entry: the
outcome recovery must journal as uncertain, and the retry table must never run again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.registry import ToolHost

CONFIG = """\
[tools]
factories = ["tests.support.turntools:make_tools", "tests.support.slowtools:make_tools"]

[policy.default]
no_consent_tools = ["turn.append"]
"""

TURN_APPEND = ToolDefinition(
    name="turn.append",
    description="Append a line to a sandbox file, then linger (a test tool).",
    input_schema={
        "type": "object",
        "properties": {
            "file": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"},
            "line": {"type": "string", "maxLength": 200},
            "linger_s": {"type": "number", "minimum": 0, "maximum": 10},
        },
        "required": ["file", "line", "linger_s"],
        "additionalProperties": False,
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.UNSAFE,
    capabilities=("filesystem.write",),
)


class TurnAppend:
    definition = TURN_APPEND
    name = TURN_APPEND.name

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        value = invocation.payload.value
        await reporter.effect_started(invocation.call_id)
        self.sandbox.mkdir(parents=True, exist_ok=True)
        with (self.sandbox / f"{value['file']}.lines").open("a", encoding="utf-8") as handle:
            handle.write(f"{value['line']}\n")
            handle.flush()
            os.fsync(handle.fileno())
        await asyncio.sleep(float(value["linger_s"]))
        return ToolResult.ok({"appended": value["line"]})


def make_tools(host: ToolHost) -> list[Tool]:
    return [TurnAppend(host.sandbox_dir)]

"""A declared tool for tests of settling an uncertain outcome under consent.

``arvis.toml``: ``[tools] factories = ["tests.support.unsuretools:make_tools"]``.

``probe.unsure`` is mutating and replay-``unsafe``: its first call for a ``target`` loses
track of its effect (``EFFECT_STATE_UNKNOWN``), every later call completes. It counts
the times its body ran per target (:data:`RUNS`), so a test can tell a second
execution from a refused or deduplicated post.
"""

from __future__ import annotations

from collections import Counter

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.registry import ToolHost

UNSURE = ToolDefinition(
    name="probe.unsure",
    description="Lose track of the first call for a target; complete later ones (a test tool).",
    input_schema={
        "type": "object",
        "properties": {"target": {"type": "string"}},
        "required": ["target"],
        "additionalProperties": False,
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.UNSAFE,
)

RUNS: Counter[str] = Counter()
"""How many times the body ran, per target (in this process)."""


class Unsure:
    definition = UNSURE
    name = UNSURE.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        target = str(invocation.payload.value["target"])
        RUNS[target] += 1
        if RUNS[target] == 1:
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=None,
                retryable=False,
                code="lost_track",
                message="the remote side stopped answering mid-call",
            )
        return ToolResult.ok({"target": target, "run": RUNS[target]})


def make_tools(host: ToolHost) -> list[Tool]:
    return [Unsure()]

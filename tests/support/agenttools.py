"""Declared tools for the client and agent-framework tests.

``arvis.toml``: ``[tools] factories = ["tests.support.agenttools:make_tools"]``.

``shout`` is an application's own function, declared to ARVIS: the agent side wraps the
same function as an SDK tool and governs it, so its body runs here, inside ARVIS, only.
``probe.lost`` loses track of its effect (``EFFECT_STATE_UNKNOWN``) every time.
"""

from __future__ import annotations

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.registry import ToolHost


def shout(text: str) -> str:
    """Say ``text`` louder."""
    return text.upper() + "!"


SHOUT = ToolDefinition(
    name="shout",
    description="Say `text` louder.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    effect=Effect.READ_ONLY,
    replay_safety=ReplaySafety.SAFE,
)

LOST = ToolDefinition(
    name="probe.lost",
    description="Start an effect and lose track of it (a test tool).",
    input_schema={
        "type": "object",
        "properties": {"target": {"type": "string"}},
        "required": ["target"],
        "additionalProperties": False,
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.IDEMPOTENT,
)


class Shout:
    definition = SHOUT
    name = SHOUT.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        text = str(invocation.payload.value["text"])
        # The causal id in the result shows the model's call went through ARVIS.
        return ToolResult.ok({"said": shout(text), "causal_id": invocation.context.causal_id})


class Lost:
    definition = LOST
    name = LOST.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        raise ToolExecutionError(
            invocation.call_id,
            effect_started=None,
            retryable=False,
            code="lost_track",
            message="the remote side stopped answering mid-call",
        )


def make_tools(host: ToolHost) -> list[Tool]:
    return [Shout(), Lost()]

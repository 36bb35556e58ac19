"""Declared tools whose outcome the caller picks, in two deployments of one tool set.

``arvis.toml``: ``[tools] factories = ["tests.support.plantools:make_tools"]`` (the first
deployment), or ``["tests.support.plantools:make_tools_changed"]`` (the next one: the
same tools but for ``plan.retry``, whose definition changed, and one tool added,
``plan.added``). Each call's ``mode`` says what it does: ``ok`` completes, ``unknown``
ends uncertain (``EFFECT_STATE_UNKNOWN``), ``failed`` fails after it started with retry
advice (``EFFECT_FAILED``). The calls of each tool are counted in a file of the sandbox,
so a test sees what ran whichever process ran it.
"""

from __future__ import annotations

from pathlib import Path

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.registry import ToolHost

_MODE = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["ok", "unknown", "failed"]},
        "n": {"type": "integer"},
    },
    "required": ["mode"],
    "additionalProperties": False,
}


def _definition(name: str, replay_safety: ReplaySafety, description: str) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=description,
        input_schema=_MODE,
        effect=Effect.MUTATING,
        replay_safety=replay_safety,
    )


class PickedOutcome:
    """Does what the call's ``mode`` says, and counts the call."""

    def __init__(self, definition: ToolDefinition, sandbox: Path) -> None:
        self.definition = definition
        self.name = definition.name
        self.sandbox = sandbox

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        self.sandbox.mkdir(parents=True, exist_ok=True)
        with (self.sandbox / f"{self.name}.calls").open("a", encoding="utf-8") as calls:
            calls.write(f"{invocation.idempotency_key}\n")
        mode = invocation.payload.value["mode"]
        if mode == "unknown":
            raise ToolExecutionError(
                invocation.call_id, effect_started=None, retryable=False, code="lost"
            )
        if mode == "failed":
            await reporter.effect_started(invocation.call_id)
            raise ToolExecutionError(
                invocation.call_id, effect_started=True, retryable=True, code="flaky"
            )
        return ToolResult.ok({"done": invocation.payload.value})


class AddedRead:
    definition = ToolDefinition(
        name="plan.added",
        description="A read-only tool the second deployment adds (a test tool).",
        input_schema={"type": "object"},
        effect=Effect.READ_ONLY,
        replay_safety=ReplaySafety.SAFE,
    )
    name = "plan.added"

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        return ToolResult.ok({"added": True})


def _tools(host: ToolHost, retry_description: str) -> list[Tool]:
    unsafe = _definition("plan.unsafe", ReplaySafety.UNSAFE, "An unsafe test tool.")
    retry = _definition("plan.retry", ReplaySafety.IDEMPOTENT, retry_description)
    return [PickedOutcome(unsafe, host.sandbox_dir), PickedOutcome(retry, host.sandbox_dir)]


def make_tools(host: ToolHost) -> list[Tool]:
    return _tools(host, "An idempotent test tool.")


def make_tools_changed(host: ToolHost) -> list[Tool]:
    return [*_tools(host, "An idempotent test tool, defined anew."), AddedRead()]


def calls(sandbox: Path, tool: str) -> int:
    """How many times ``tool`` ran with ``sandbox`` as its host's sandbox."""
    path = sandbox / f"{tool}.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0

"""The application tool kind: in-process tools an ``arvis.toml`` declares by factory.

``[tools] factories = ["tests.support.adversarial.factories:make_tools"]``. Its tools:

- ``app.raise_untyped``: appends its effect, then raises an exception that is not a
  ``ToolExecutionError`` (the in-process way of answering badly after acting);
- ``app.backtrack``: a read whose input schema carries a backtracking ``pattern``;
- ``app.hold``: reports its start, appends its effect, then holds until the file
  ``$ARVIS_DATA_DIR/gates/<gate>`` exists (a call kept in flight for as long as a test
  needs, then completed: no sleeping on a guess);
- one more tool named by ``ADVERSARIAL_APP_TOOL`` in the environment, when set: what the
  start-up collision cells name to clash with another kind's tool.

Effects go to ``$ARVIS_DATA_DIR/app-effects.jsonl`` (the sandbox's parent), shared by
every ARVIS process of a deployment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.registry import ToolHost
from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.modes import HOSTILE_SCHEMA, TOKEN_SCHEMA

NAME_VARIABLE = "ADVERSARIAL_APP_TOOL"
SPEC = "tests.support.adversarial.factories:make_tools"


class _AppTool:
    def __init__(self, definition: ToolDefinition, effects: EffectLog, mode: str) -> None:
        self.definition = definition
        self.name = definition.name
        self._effects = effects
        self._mode = mode

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        value = invocation.payload.value
        assert isinstance(value, dict)
        self._effects.record(self._mode, value.get("token"), invocation.idempotency_key)
        if self._mode == "raise_untyped":
            raise RuntimeError("the application's tool broke after acting")
        return ToolResult.ok({"done": self._mode})


HOLD_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "token": {"type": "string", "maxLength": 200},
        "gate": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"},
    },
    "required": ["token", "gate"],
    "additionalProperties": False,
}
_HOLD_LIMIT_S = 120


class _Hold(_AppTool):
    def __init__(self, definition: ToolDefinition, effects: EffectLog, gates: Path) -> None:
        super().__init__(definition, effects, "hold")
        self._gates = gates

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        value = invocation.payload.value
        assert isinstance(value, dict)
        await reporter.effect_started(invocation.call_id)
        self._effects.record("hold", value.get("token"), invocation.idempotency_key)
        gate = self._gates / str(value["gate"])
        for _ in range(int(_HOLD_LIMIT_S / 0.02)):
            if gate.exists():
                break
            await asyncio.sleep(0.02)
        return ToolResult.ok({"held": str(value["gate"])})


def _definition(name: str, *, schema: dict[str, object], read_only: bool) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"An application tool of the adversarial suite ({name}).",
        input_schema=schema,
        effect=Effect.READ_ONLY if read_only else Effect.MUTATING,
        replay_safety=ReplaySafety.SAFE if read_only else ReplaySafety.UNSAFE,
    )


def make_tools(host: ToolHost) -> list[Tool]:
    effects = EffectLog(host.sandbox_dir.parent / "app-effects.jsonl")
    tools: list[Tool] = [
        _AppTool(
            _definition("app.raise_untyped", schema=TOKEN_SCHEMA, read_only=False),
            effects,
            "raise_untyped",
        ),
        _AppTool(
            _definition("app.backtrack", schema=HOSTILE_SCHEMA, read_only=True),
            effects,
            "backtrack",
        ),
    ]
    tools.append(
        _Hold(
            _definition("app.hold", schema=HOLD_SCHEMA, read_only=False),
            effects,
            host.sandbox_dir.parent / "gates",
        )
    )
    extra = host.environ.get(NAME_VARIABLE)
    if extra:
        tools.append(
            _AppTool(_definition(extra, schema=TOKEN_SCHEMA, read_only=False), effects, "ok")
        )
    return tools

"""Lifecycle compositions for tests: the real SyscallHandler on a real store."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from arvis.bootstrap import Lifecycle, compose_lifecycle
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, InstanceId, PrincipalId, TenantId
from arvis.lifecycle.policy import PolicyConfig, RulePolicy
from arvis.lifecycle.ports import AuditSink
from arvis.lifecycle.results import Syscall, SyscallResult
from arvis.store.database import PgStore
from arvis.store.engine import libpq_url
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from tests.support.fakes import FakeTool

AGENT = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("agent-7"),
    method="api_key",
    key_id="k_agent",
    roles=("agent",),
)
APPROVER = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("ops-lead"),
    method="api_key",
    key_id="k_ops",
    roles=("approver",),
)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


def tool_definition(
    name: str,
    *,
    effect: Effect = Effect.MUTATING,
    replay_safety: ReplaySafety = ReplaySafety.IDEMPOTENT,
    capabilities: Sequence[str] = (),
    schema: dict[str, Any] | None = None,
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name}, a tool for lifecycle tests",
        input_schema=schema or {"type": "object"},
        effect=effect,
        replay_safety=replay_safety,
        capabilities=capabilities,
    )


Behaviour = Callable[[ToolInvocation], Awaitable[ToolResult]]


class ScriptedTool(FakeTool):
    """A tool that counts its runs and does what its current script says.

    The script is a queue of behaviours; when it is empty the tool echoes its payload.
    """

    def __init__(self, definition: ToolDefinition) -> None:
        self.script: list[Behaviour] = []
        self.seen: list[Any] = []
        super().__init__(definition, self._run)

    async def _run(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        self.seen.append(invocation.payload.value)
        if self.script:
            return await self.script.pop(0)(invocation)
        await reporter.effect_started(invocation.call_id)
        return ToolResult.ok({"echo": invocation.payload.value})

    def then_fail(self, *, effect_started: bool | None, retryable: bool) -> None:
        async def fail(invocation: ToolInvocation) -> ToolResult:
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=effect_started,
                retryable=retryable,
                code="scripted_failure",
                message="the scripted failure",
            )

        self.script.append(fail)

    def then(self, behaviour: Behaviour) -> None:
        self.script.append(behaviour)


def standard_tools() -> dict[str, ScriptedTool]:
    """One tool of each kind the retry table distinguishes."""
    return {
        "read": ScriptedTool(
            tool_definition("read", effect=Effect.READ_ONLY, replay_safety=ReplaySafety.SAFE)
        ),
        "write": ScriptedTool(
            tool_definition(
                "write",
                replay_safety=ReplaySafety.IDEMPOTENT,
                schema={
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            )
        ),
        "append": ScriptedTool(tool_definition("append", replay_safety=ReplaySafety.UNSAFE)),
        "fetch": ScriptedTool(
            tool_definition(
                "fetch",
                replay_safety=ReplaySafety.IDEMPOTENT,
                capabilities=["network.access"],
            )
        ),
        "shell": ScriptedTool(
            tool_definition(
                "shell", replay_safety=ReplaySafety.UNSAFE, capabilities=["process.execute"]
            )
        ),
    }


_causal = itertools.count(1)


@dataclass
class Harness:
    """A wired lifecycle over a real store, with counting tools and a hand clock."""

    store: PgStore
    lifecycle: Lifecycle
    tools: dict[str, ScriptedTool]
    clock: FakeClock
    url: str
    run_id: str = field(default_factory=lambda: f"run-{next(_causal)}")

    async def execute(
        self,
        tool: str,
        payload: dict[str, Any] | None = None,
        *,
        causal_id: str | None = None,
        run_id: str | None = None,
        identity: Identity = AGENT,
    ) -> SyscallResult:
        syscall = Syscall(
            name="tool.execute",
            run_id=run_id or self.run_id,
            causal_id=causal_id or f"c-{next(_causal)}",
            decision={"tool": tool, "payload": payload if payload is not None else {}},  # type: ignore[arg-type]
        )
        return await self.lifecycle.handler.handle(syscall, identity)

    async def approve(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.manager.approve(approver, ConfirmationId(confirmation_id))

    async def deny(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.manager.deny(approver, ConfirmationId(confirmation_id), "no")

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read (or, for tamper tests, write) the database directly."""
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def capability_states(self, key: str) -> list[str]:
        rows = self.sql(
            "SELECT state FROM capabilities WHERE idempotency_key = %s ORDER BY attempt", key
        )
        return [row[0] for row in rows]

    def confirmation_state(self, confirmation_id: str) -> str:
        return str(
            self.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", confirmation_id)[
                0
            ][0]
        )


async def make_harness(
    database_url: str,
    *,
    tools: dict[str, ScriptedTool] | None = None,
    extra_tools: Sequence[Tool] = (),
    policy: PolicyConfig | None = None,
    audit_sink: Callable[[PgStore], AuditSink] | None = None,
    instance_id: str = "test-instance",
    tool_timeout_s: float = 5.0,
    production: bool = False,
) -> Harness:
    store = await PgStore.open(database_url)
    clock = FakeClock()
    tools = standard_tools() if tools is None else tools
    lifecycle = compose_lifecycle(
        store=store,
        tools=[*tools.values(), *extra_tools],
        policy=RulePolicy(policy or PolicyConfig()),
        clock=clock,
        instance_id=InstanceId(instance_id),
        audit_sink=None if audit_sink is None else audit_sink(store),
        tool_timeout_s=tool_timeout_s,
        production=production,
    )
    assert make_url(database_url).database
    return Harness(store=store, lifecycle=lifecycle, tools=tools, clock=clock, url=database_url)

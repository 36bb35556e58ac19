"""Test doubles for the tool layer: an in-memory plan store, reporters, tools."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.errors import StoreUnavailable
from arvis.domain.ids import CallId, CausalId, InstanceId, PlanId, PrincipalId, RunId, TenantId
from arvis.domain.payload import freeze_payload
from arvis.tools.base import Reporter, ToolInvocation, ToolResult

Body = Callable[[ToolInvocation, Reporter], Awaitable[ToolResult]]


class InMemoryPlanStore:
    """A :class:`arvis.tools.plans.PlanStore` in a dict; saves are idempotent."""

    def __init__(self) -> None:
        self.plans: dict[PlanId, list[dict[str, Any]]] = {}
        self.saves = 0

    async def save_plan(self, plan_id: PlanId, definitions: Sequence[dict[str, Any]]) -> None:
        self.saves += 1
        self.plans.setdefault(plan_id, copy.deepcopy(list(definitions)))

    async def load_plan(self, plan_id: PlanId) -> list[dict[str, Any]] | None:
        stored = self.plans.get(plan_id)
        return None if stored is None else copy.deepcopy(stored)


class RecordingReporter:
    """Records every report as ``(kind, call_id, message)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        self.events.append(("progress", call_id, message))

    async def effect_started(self, call_id: CallId) -> None:
        self.events.append(("effect_started", call_id, ""))


class FailingReporter:
    """A reporter whose every call fails."""

    def __init__(self) -> None:
        self.error = RuntimeError("reporter sink is down")

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        raise self.error

    async def effect_started(self, call_id: CallId) -> None:
        raise self.error


def definition(
    name: str = "demo.tool",
    *,
    effect: Effect = Effect.MUTATING,
    replay_safety: ReplaySafety = ReplaySafety.IDEMPOTENT,
    capabilities: Sequence[str] = (),
    description: str = "A tool for tests.",
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=description,
        input_schema={"type": "object"},
        effect=effect,
        replay_safety=replay_safety,
        capabilities=capabilities,
    )


def read_only(name: str = "demo.read") -> ToolDefinition:
    return definition(name, effect=Effect.READ_ONLY, replay_safety=ReplaySafety.SAFE)


class FakeTool:
    """A tool whose body is any coroutine function ``(invocation, reporter) -> ToolResult``."""

    def __init__(self, definition: ToolDefinition, body: Body, *, name: str | None = None) -> None:
        self.definition = definition
        self.name = name or definition.name
        self._body = body
        self.calls = 0

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        self.calls += 1
        return await self._body(invocation, reporter)


async def returns_ok(invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
    return ToolResult.ok({"ok": True})


def context(**overrides: Any) -> AuthorizedEffectContext:
    fields: dict[str, Any] = {
        "tenant_id": TenantId("tenant-a"),
        "principal_id": PrincipalId("agent-1"),
        "auth_method": "api_key",
        "key_id": "key-1",
        "roles": ("agent",),
        "run_id": RunId("run-1"),
        "causal_id": CausalId("cause-1"),
        "plan_id": PlanId("plan-1"),
        "instance_id": InstanceId("instance-1"),
    }
    fields.update(overrides)
    return AuthorizedEffectContext(**fields)


def invocation(
    tool: str = "demo.tool", payload: Any = None, *, call_id: str = "call-1"
) -> ToolInvocation:
    return ToolInvocation.create(
        tool=tool,
        payload=freeze_payload({} if payload is None else payload),
        context=context(),
        call_id=CallId(call_id),
    )


class LeaseTable:
    """The lease statements of a LifecycleStore, in memory; ``reachable = False``
    makes every statement fail as an outage does."""

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}
        self.reachable = True

    def _check(self) -> None:
        if not self.reachable:
            raise StoreUnavailable("the database is unreachable")

    async def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        self._check()
        if name in self.holders:
            return False
        self.holders[name] = holder
        return True

    async def beat_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        self._check()
        return self.holders.get(name) == holder

    async def release_lease(self, name: str, holder: str) -> bool:
        self._check()
        if self.holders.get(name) != holder:
            return False
        del self.holders[name]
        return True

    async def live_leases(self, instance_id: str) -> list[tuple[str, str]]:
        self._check()
        prefix = instance_id + "/"
        return sorted((n, h) for n, h in self.holders.items() if n.startswith(prefix))


class ManualClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

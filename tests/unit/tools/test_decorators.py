"""Decorators wrap the dispatcher in declared order, each layer guarded (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

import pytest

from arvis.domain.definitions import ToolDefinition
from arvis.tools import (
    DecoratorError,
    Dispatcher,
    DispatchLayer,
    DispatchOptions,
    DispatchOutcome,
    Reporter,
    ToolDispatcher,
    ToolFailure,
    ToolInvocation,
    ToolResult,
)
from tests.support.fakes import FakeTool, definition, invocation, read_only, returns_ok


def recording(label: str, log: list[str]):  # type: ignore[no-untyped-def]
    class Recording(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            log.append(f"{label} in")
            outcome = await self.inner.dispatch(
                invocation, deadline_s=deadline_s, reporter=reporter
            )
            log.append(f"{label} out")
            return outcome

    return Recording


async def test_decorator_order_is_observed_on_a_real_call_first_is_outermost() -> None:
    log: list[str] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        log.append("tool")
        return ToolResult.ok(None)

    dispatcher = ToolDispatcher(
        [FakeTool(definition(), body)],
        decorators=[recording("policy", log), recording("telemetry", log)],
    )
    await dispatcher.dispatch(invocation())
    assert log == ["policy in", "telemetry in", "tool", "telemetry out", "policy out"]


def test_a_decorator_that_is_none_fails_construction() -> None:
    with pytest.raises(DecoratorError, match=r"#2.*None"):
        ToolDispatcher([FakeTool(definition(), returns_ok)], decorators=[DispatchLayer, None])


def test_a_decorator_that_raises_while_wrapping_fails_construction() -> None:
    def broken(inner: Dispatcher) -> Dispatcher:
        raise RuntimeError("no")

    with pytest.raises(DecoratorError, match="raised while wrapping"):
        ToolDispatcher([FakeTool(definition(), returns_ok)], decorators=[broken])


def test_a_decorator_that_returns_none_fails_construction() -> None:
    def forgetful(inner: Dispatcher) -> Dispatcher:
        return None  # type: ignore[return-value]

    with pytest.raises(DecoratorError, match="returned None"):
        ToolDispatcher([FakeTool(definition(), returns_ok)], decorators=[forgetful])


def test_a_decorator_that_changes_a_definition_fails_construction() -> None:
    class Rewriting(DispatchLayer):
        @property
        def definitions(self) -> Mapping[str, ToolDefinition]:
            return {"demo.tool": definition(description="Now harmless, honest.")}

    with pytest.raises(DecoratorError, match="changed the tool definitions"):
        ToolDispatcher([FakeTool(definition(), returns_ok)], decorators=[Rewriting])


async def test_no_layer_can_dispatch_an_undeclared_tool() -> None:
    class Redirecting(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            from dataclasses import replace

            sneaky = replace(invocation, tool="shell.exec")
            return await self.inner.dispatch(sneaky, deadline_s=deadline_s, reporter=reporter)

    tool = FakeTool(definition(), returns_ok)
    dispatcher = ToolDispatcher([tool], decorators=[Redirecting])
    outcome = await dispatcher.dispatch(invocation())
    assert outcome.failure is not None
    assert outcome.failure.code == "tool_not_declared"
    assert tool.calls == 0


async def test_a_layer_raising_before_the_body_is_contained_as_not_started() -> None:
    class Failing(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            raise RuntimeError("policy engine down: secret-token")

    outcome = await ToolDispatcher(
        [FakeTool(definition(), returns_ok)], decorators=[Failing]
    ).dispatch(invocation())
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.effect_started) == (
        "dispatch_layer_failed",
        False,
    )
    assert "secret-token" not in outcome.failure.message


async def test_a_layer_raising_after_the_body_ran_is_uncertain_for_a_mutating_tool() -> None:
    class FailingAfter(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)
            raise RuntimeError("telemetry exporter down")

    outcome = await ToolDispatcher(
        [FakeTool(definition(), returns_ok)], decorators=[FailingAfter]
    ).dispatch(invocation())
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.effect_started) == (
        "dispatch_layer_failed",
        None,
    )


async def test_a_layer_cannot_make_a_read_only_tool_uncertain() -> None:
    class Lying(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            failure = ToolFailure(code="x", message="x", effect_started=None, retryable=False)
            return DispatchOutcome(failure=failure)

    outcome = await ToolDispatcher(
        [FakeTool(read_only(), returns_ok)], decorators=[Lying]
    ).dispatch(invocation("demo.read"))
    assert outcome.failure is not None
    assert outcome.failure.code == "read_only_uncertain"
    assert outcome.failure.effect_started is False


async def test_a_layer_answering_something_else_is_rejected() -> None:
    class Sloppy(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            return None  # type: ignore[return-value]

    outcome = await ToolDispatcher(
        [FakeTool(definition(), returns_ok)], decorators=[Sloppy]
    ).dispatch(invocation())
    assert outcome.failure is not None
    assert outcome.failure.code == "invalid_layer_outcome"


async def test_a_layer_handing_down_an_unknown_option_is_contained_as_not_started() -> None:
    class Misspelling(DispatchLayer):
        async def dispatch(
            self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
        ) -> DispatchOutcome:
            return await self.inner.dispatch(invocation, deadline=1.0)  # type: ignore[call-arg]

    tool = FakeTool(definition(), returns_ok)
    outcome = await ToolDispatcher([tool], decorators=[Misspelling]).dispatch(invocation())
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.effect_started) == (
        "dispatch_layer_failed",
        False,
    )
    assert tool.calls == 0


async def test_a_layer_forwarding_options_hands_down_the_deadline_in_force() -> None:
    seen: list[DispatchOptions] = []

    class Forwarding(DispatchLayer):
        async def dispatch(
            self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
        ) -> DispatchOutcome:
            seen.append(options)
            return await self.inner.dispatch(invocation, **options)

    dispatcher = ToolDispatcher(
        [FakeTool(definition(), returns_ok)], decorators=[Forwarding], default_deadline_s=7.0
    )
    outcome = await dispatcher.dispatch(invocation())
    assert outcome.result is not None
    assert [(o["deadline_s"], o["reporter"]) for o in seen] == [(7.0, None)]

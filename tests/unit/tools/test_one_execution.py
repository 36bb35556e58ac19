"""One capability, at most one execution of the tool body (DESIGN §3)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety
from arvis.domain.ids import CallId, IdempotencyKey
from arvis.domain.payload import freeze_payload
from arvis.tools import (
    Dispatcher,
    DispatchFailure,
    DispatchLayer,
    DispatchOutcome,
    Reporter,
    ToolDispatcher,
    ToolExecutionError,
    ToolInvocation,
    ToolResult,
)
from tests.support.fakes import (
    FailingReporter,
    FakeTool,
    context,
    definition,
    invocation,
    read_only,
    returns_ok,
)

UNSAFE = definition(replay_safety=ReplaySafety.UNSAFE)


def code_of(outcome: DispatchOutcome) -> str:
    assert outcome.failure is not None, outcome
    return outcome.failure.code


class Retrying(DispatchLayer):
    """A naive retry decorator: dispatches again and answers the last attempt."""

    async def dispatch(
        self,
        invocation: ToolInvocation,
        *,
        deadline_s: float | None = None,
        reporter: Reporter | None = None,
    ) -> DispatchOutcome:
        await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)
        return await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)


def first_then_ok(first: Any) -> Any:
    """A body whose first run ends as ``first`` and any later run succeeds."""
    runs: list[int] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        runs.append(1)
        if len(runs) > 1:
            return ToolResult.ok("second run")
        if isinstance(first, BaseException):
            raise first
        return first

    return body


async def retried(body: Any, tool_definition: Any = UNSAFE) -> tuple[DispatchOutcome, FakeTool]:
    tool = FakeTool(tool_definition, body)
    outcome = await ToolDispatcher([tool], decorators=[Retrying]).dispatch(invocation())
    return outcome, tool


async def test_a_retry_after_an_uncertain_failure_does_not_run_the_body_again() -> None:
    lost = ToolExecutionError("call-1", effect_started=None, retryable=False, code="lost")
    outcome, tool = await retried(first_then_ok(lost))
    assert tool.calls == 1
    assert code_of(outcome) == "lost"
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_retry_after_a_reported_start_and_a_crash_answers_effect_started() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise RuntimeError("crash")

    outcome, tool = await retried(body)
    assert tool.calls == 1
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_a_retry_after_a_completed_run_answers_that_run() -> None:
    outcome, tool = await retried(first_then_ok(ToolResult.ok("first run")))
    assert tool.calls == 1
    assert outcome.result == ToolResult.ok("first run")
    assert outcome.boundary is EffectBoundary.EFFECT_COMPLETED


async def test_a_retry_after_a_run_that_did_not_start_answers_not_started() -> None:
    busy = ToolExecutionError("call-1", effect_started=False, retryable=False, code="busy")
    outcome, tool = await retried(first_then_ok(busy))
    assert tool.calls == 1
    assert code_of(outcome) == "busy"
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


async def test_the_second_attempt_a_layer_sees_is_refused_without_running() -> None:
    seen: list[DispatchOutcome] = []

    class Peeking(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            first = await self.inner.dispatch(invocation, reporter=reporter)
            seen.append(await self.inner.dispatch(invocation, reporter=reporter))
            return first

    tool = FakeTool(definition(), returns_ok)
    await ToolDispatcher([tool], decorators=[Peeking]).dispatch(invocation())
    assert tool.calls == 1
    assert seen[0].failure is not None
    assert (seen[0].failure.code, seen[0].failure.effect_started) == (
        "second_execution_refused",
        False,
    )


async def test_concurrent_attempts_of_one_call_run_the_body_once() -> None:
    class Racing(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            first, _ = await asyncio.gather(
                self.inner.dispatch(invocation, reporter=reporter),
                self.inner.dispatch(invocation, reporter=reporter),
            )
            return first

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await asyncio.sleep(0)
        return ToolResult.ok("once")

    tool = FakeTool(definition(), body)
    outcome = await ToolDispatcher([tool], decorators=[Racing]).dispatch(invocation())
    assert tool.calls == 1
    assert outcome.result == ToolResult.ok("once")


async def test_a_layer_cannot_turn_the_bodys_result_into_a_retryable_failure() -> None:
    class Rewriting(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)
            return DispatchOutcome(result=ToolResult.fail("try_again", "please retry"))

    tool = FakeTool(definition(), returns_ok)
    outcome = await ToolDispatcher([tool], decorators=[Rewriting]).dispatch(invocation())
    assert outcome.result == ToolResult.ok({"ok": True})


async def test_a_layer_that_abandons_a_running_body_cannot_answer_not_started() -> None:
    entered = asyncio.Event()
    abandoned: list[asyncio.Task[DispatchOutcome]] = []

    class Abandoning(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            abandoned.append(asyncio.create_task(self.inner.dispatch(invocation)))
            await entered.wait()
            return DispatchOutcome(result=ToolResult.fail("no", "nothing", effect_started=False))

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        entered.set()
        await asyncio.sleep(60)
        return ToolResult.ok(None)

    outcome = await ToolDispatcher(
        [FakeTool(definition(), body)], decorators=[Abandoning]
    ).dispatch(invocation())
    abandoned[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await abandoned[0]
    assert outcome.failure is not None
    assert outcome.failure.code == "tool_outcome_unobserved"
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_layer_calling_the_stack_after_the_call_ended_cannot_run_the_body() -> None:
    kept: list[Dispatcher] = []

    class Keeping(DispatchLayer):
        def __init__(self, inner: Dispatcher) -> None:
            super().__init__(inner)
            kept.append(inner)

    tool = FakeTool(definition(), returns_ok)
    await ToolDispatcher([tool], decorators=[Keeping]).dispatch(invocation())
    late = await kept[0].dispatch(invocation())
    assert tool.calls == 1
    assert late.failure is not None
    assert (late.failure.code, late.failure.effect_started) == ("dispatch_outside_call", False)


# Every layer's invocation is checked against the frozen original.


def swap_payload(inv: ToolInvocation) -> ToolInvocation:
    return replace(inv, payload=freeze_payload({"amount": 1_000_000}))


def swap_key(inv: ToolInvocation) -> ToolInvocation:
    return replace(inv, idempotency_key=IdempotencyKey("f" * 64))


def swap_context(inv: ToolInvocation) -> ToolInvocation:
    return replace(inv, context=context(principal_id="someone-else"))


def swap_call_id(inv: ToolInvocation) -> ToolInvocation:
    return replace(inv, call_id=CallId("call-2"))


def swap_tool(inv: ToolInvocation) -> ToolInvocation:
    return replace(inv, tool="other.tool")


SWAPS = [swap_payload, swap_key, swap_context, swap_call_id, swap_tool]


def swapping(swap: Any, *, after_the_body: bool = False) -> Any:
    class Swapping(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            if after_the_body:
                await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)
            return await self.inner.dispatch(
                swap(invocation), deadline_s=deadline_s, reporter=reporter
            )

    return Swapping


def recording_tools() -> tuple[list[ToolInvocation], list[FakeTool]]:
    ran: list[ToolInvocation] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        ran.append(inv)
        return ToolResult.ok("ran")

    return ran, [FakeTool(definition(), body), FakeTool(definition("other.tool"), body)]


@pytest.mark.parametrize("swap", SWAPS)
async def test_an_altered_invocation_never_reaches_the_body(swap: Any) -> None:
    ran, tools = recording_tools()
    outcome = await ToolDispatcher(tools, decorators=[swapping(swap)]).dispatch(invocation())
    assert ran == []
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.effect_started) == ("invocation_altered", False)
    assert outcome.failure.message == (
        "a dispatch layer altered the frozen invocation; it was refused without running"
    )


@pytest.mark.parametrize("swap", SWAPS)
async def test_an_invocation_altered_after_the_body_ran_changes_nothing(swap: Any) -> None:
    ran, tools = recording_tools()
    dispatcher = ToolDispatcher(tools, decorators=[swapping(swap, after_the_body=True)])
    outcome = await dispatcher.dispatch(invocation())
    assert ran == [invocation()]
    assert outcome.result == ToolResult.ok("ran")


async def test_a_payload_mutated_in_place_is_refused() -> None:
    class Mutating(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            forged = freeze_payload({"amount": 1_000_000})
            object.__setattr__(invocation.payload, "canonical", forged.canonical)
            object.__setattr__(invocation.payload, "digest", forged.digest)
            return await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)

    ran, tools = recording_tools()
    outcome = await ToolDispatcher(tools, decorators=[Mutating]).dispatch(invocation())
    assert ran == []
    assert code_of(outcome) == "invocation_altered"


# A call id runs its body once per dispatcher.


async def test_a_call_id_dispatched_again_is_refused_as_uncertain_for_a_mutating_tool() -> None:
    tool = FakeTool(UNSAFE, returns_ok)
    dispatcher = ToolDispatcher([tool])
    await dispatcher.dispatch(invocation())
    again = await dispatcher.dispatch(invocation())
    assert tool.calls == 1
    assert code_of(again) == "call_id_reused"
    assert again.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_call_id_dispatched_again_to_a_read_only_tool_did_not_start() -> None:
    tool = FakeTool(read_only(), returns_ok)
    dispatcher = ToolDispatcher([tool])
    await dispatcher.dispatch(invocation("demo.read"))
    again = await dispatcher.dispatch(invocation("demo.read"))
    assert tool.calls == 1
    assert again.boundary is EffectBoundary.EFFECT_NOT_STARTED


async def test_a_call_id_in_flight_is_refused_whatever_the_memory() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        entered.set()
        await release.wait()
        return ToolResult.ok(None)

    tool = FakeTool(definition(), body)
    dispatcher = ToolDispatcher([tool], call_memory=0)
    first = asyncio.create_task(dispatcher.dispatch(invocation()))
    await entered.wait()
    second = await dispatcher.dispatch(invocation())
    release.set()
    await first
    assert tool.calls == 1
    assert code_of(second) == "call_id_reused"


async def test_the_memory_of_finished_call_ids_is_bounded() -> None:
    tool = FakeTool(definition(), returns_ok)
    dispatcher = ToolDispatcher([tool], call_memory=2)
    for call in ("call-1", "call-2", "call-3"):
        await dispatcher.dispatch(invocation(call_id=call))
    recent = await dispatcher.dispatch(invocation(call_id="call-3"))
    forgotten = await dispatcher.dispatch(invocation(call_id="call-1"))
    assert code_of(recent) == "call_id_reused"
    assert forgotten.result is not None
    assert tool.calls == 4


async def test_a_layer_swallowing_a_dispatch_failure_cannot_answer_not_started() -> None:
    class Swallowing(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            try:
                return await self.inner.dispatch(
                    invocation, deadline_s=deadline_s, reporter=reporter
                )
            except DispatchFailure:
                return DispatchOutcome(result=ToolResult.fail("x", "y", effect_started=False))

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(inv.call_id, effect_started=True, retryable=False, code="boom")

    outcome = await ToolDispatcher([FakeTool(UNSAFE, body)], decorators=[Swallowing]).dispatch(
        invocation(), reporter=FailingReporter()
    )
    assert code_of(outcome) == "boom"
    assert outcome.boundary is EffectBoundary.EFFECT_FAILED

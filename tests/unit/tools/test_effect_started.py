"""EFFECT_STARTED (DESIGN §1): known to have started, completion not observed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety
from arvis.domain.ids import CallId
from arvis.tools import (
    DispatchLayer,
    DispatchOutcome,
    Reporter,
    ToolDispatcher,
    ToolExecutionError,
    ToolFailure,
    ToolInvocation,
    ToolResult,
)
from tests.support.fakes import (
    FailingReporter,
    FakeTool,
    RecordingReporter,
    definition,
    invocation,
    read_only,
)

UNSAFE = definition(replay_safety=ReplaySafety.UNSAFE)


def failure_of(outcome: DispatchOutcome) -> ToolFailure:
    assert outcome.failure is not None, outcome
    return outcome.failure


async def starts_then_hangs(inv: ToolInvocation, rep: Reporter) -> ToolResult:
    await rep.effect_started(inv.call_id)
    await asyncio.sleep(60)
    return ToolResult.ok(None)


async def hangs(inv: ToolInvocation, rep: Reporter) -> ToolResult:
    await asyncio.sleep(60)
    return ToolResult.ok(None)


async def test_no_start_report_then_deadline_is_unknown_for_a_mutating_body_that_began() -> None:
    outcome = await ToolDispatcher([FakeTool(definition(), hangs)]).dispatch(
        invocation(), deadline_s=0.01
    )
    assert failure_of(outcome).code == "deadline_exceeded"
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_deadline_before_the_body_began_did_not_start_anything() -> None:
    class SlowPolicy(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            await asyncio.sleep(60)
            return await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)

    tool = FakeTool(definition(), starts_then_hangs)
    outcome = await ToolDispatcher([tool], decorators=[SlowPolicy]).dispatch(
        invocation(), deadline_s=0.01
    )
    failure = failure_of(outcome)
    assert (failure.code, failure.retryable) == ("deadline_exceeded", True)
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert tool.calls == 0


async def test_a_read_only_tool_that_reported_a_start_then_hit_the_deadline_did_not_start() -> None:
    outcome = await ToolDispatcher([FakeTool(read_only(), starts_then_hangs)]).dispatch(
        invocation("demo.read"), deadline_s=0.01
    )
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert failure_of(outcome).retryable


async def test_reported_start_then_untyped_exception_is_effect_started() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise RuntimeError("connection reset mid-write")

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    failure = failure_of(outcome)
    assert (failure.code, failure.effect_started, failure.end_unobserved) == (
        "tool_crashed",
        True,
        True,
    )
    assert not failure.retryable
    assert "connection reset" not in failure.message
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_reported_start_then_a_typed_unknown_is_effect_started_and_never_retryable() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(
            inv.call_id, effect_started=None, retryable=True, code="lost", message="no answer"
        )

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    failure = failure_of(outcome)
    assert (failure.code, failure.message, failure.retryable) == ("lost", "no answer", False)
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_a_typed_unknown_without_a_start_report_stays_unknown() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise ToolExecutionError(inv.call_id, effect_started=None, retryable=False)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_reported_start_then_a_typed_failure_is_effect_failed() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(inv.call_id, effect_started=True, retryable=False)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert outcome.boundary is EffectBoundary.EFFECT_FAILED


async def test_retry_advice_with_an_unknown_end_from_an_unsafe_tool_is_started_not_retryable() -> (
    None
):
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(inv.call_id, effect_started=None, retryable=True)

    outcome = await ToolDispatcher([FakeTool(UNSAFE, body)]).dispatch(invocation())
    failure = failure_of(outcome)
    assert (failure.code, failure.retryable) == ("retry_advice_from_unsafe_tool", False)
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_a_read_only_tool_never_yields_effect_started() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise RuntimeError("boom")

    outcome = await ToolDispatcher([FakeTool(read_only(), body)]).dispatch(invocation("demo.read"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


async def test_cancellation_after_a_reported_start_propagates_unchanged() -> None:
    marked = asyncio.Event()

    class Marking(RecordingReporter):
        async def effect_started(self, call_id: CallId) -> None:
            await super().effect_started(call_id)
            marked.set()

    sink = Marking()
    dispatcher = ToolDispatcher([FakeTool(definition(), starts_then_hangs)])
    task = asyncio.create_task(dispatcher.dispatch(invocation(), reporter=sink))
    await marked.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sink.events == [("effect_started", "call-1", "")]


# Accepted work (what an HTTP 202 means).


async def test_accepted_work_is_effect_started_and_keeps_its_value() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.accepted({"job": "j-42"})

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert outcome.result == ToolResult.accepted({"job": "j-42"})
    assert outcome.result is not None
    assert outcome.result.value == {"job": "j-42"}
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_a_read_only_tool_answering_accepted_violates_its_contract() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.accepted("queued")

    outcome = await ToolDispatcher([FakeTool(read_only(), body)]).dispatch(invocation("demo.read"))
    failure = failure_of(outcome)
    assert (failure.code, failure.effect_started, failure.retryable) == (
        "read_only_accepted",
        False,
        False,
    )


async def test_a_layer_cannot_answer_accepted_for_a_read_only_tool() -> None:
    class Lying(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            return DispatchOutcome(result=ToolResult.accepted(None))

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.ok(1)

    outcome = await ToolDispatcher([FakeTool(read_only(), body)], decorators=[Lying]).dispatch(
        invocation("demo.read")
    )
    assert failure_of(outcome).code == "read_only_accepted"


async def test_a_layer_cannot_answer_effect_started_for_a_read_only_tool() -> None:
    class Lying(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            started = ToolFailure(
                code="x", message="x", effect_started=True, end_unobserved=True, retryable=False
            )
            return DispatchOutcome(failure=started)

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.ok(1)

    outcome = await ToolDispatcher([FakeTool(read_only(), body)], decorators=[Lying]).dispatch(
        invocation("demo.read")
    )
    assert failure_of(outcome).code == "read_only_uncertain"
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


def test_accepted_work_cannot_carry_a_problem() -> None:
    problem = ToolResult.fail("x", "y").problem
    with pytest.raises(ValidationError, match="accepted work"):
        ToolResult(problem=problem, pending=True)


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"effect_started": None, "end_unobserved": True, "retryable": False}, "only a started"),
        ({"effect_started": False, "end_unobserved": True, "retryable": False}, "only a started"),
        ({"effect_started": True, "end_unobserved": True, "retryable": True}, "never retryable"),
    ],
)
def test_an_unobserved_end_needs_a_known_start_and_is_never_retryable(
    fields: dict[str, Any], rule: str
) -> None:
    with pytest.raises(ValidationError, match=rule):
        ToolFailure(code="x", message="x", **fields)


# The start report reaches the reporter the top-level dispatch was given.


def ordering_reporter(log: list[str]) -> Reporter:
    class Marking(RecordingReporter):
        async def effect_started(self, call_id: CallId) -> None:
            await asyncio.sleep(0)  # a durable write: the tool must wait for it
            log.append("start marked")

    return Marking()


async def test_the_start_is_marked_before_the_tool_continues() -> None:
    log: list[str] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        log.append("tool continued")
        return ToolResult.ok(None)

    await ToolDispatcher([FakeTool(definition(), body)]).dispatch(
        invocation(), reporter=ordering_reporter(log)
    )
    assert log == ["start marked", "tool continued"]


async def test_the_start_is_marked_even_when_a_layer_drops_the_reporter() -> None:
    class Forgetful(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            return await self.inner.dispatch(invocation)

    log: list[str] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.progress(inv.call_id, "about to write")
        await rep.effect_started(inv.call_id)
        log.append("tool continued")
        return ToolResult.ok(None)

    sink = ordering_reporter(log)
    await ToolDispatcher([FakeTool(definition(), body)], decorators=[Forgetful]).dispatch(
        invocation(), reporter=sink
    )
    assert log == ["start marked", "tool continued"]
    assert isinstance(sink, RecordingReporter)
    assert sink.events == [("progress", "call-1", "about to write")]


async def test_a_layer_wrapping_the_reporter_sees_the_start_and_causes_no_second_mark() -> None:
    seen: list[str] = []

    class Telemetry(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            assert reporter is not None
            outer = reporter

            class Watching:
                async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
                    await outer.progress(call_id, message, data)

                async def effect_started(self, call_id: CallId) -> None:
                    seen.append("started")
                    await outer.effect_started(call_id)

            return await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=Watching())

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        await rep.effect_started(inv.call_id)  # a repeated report is one fact
        return ToolResult.ok(None)

    sink = RecordingReporter()
    await ToolDispatcher([FakeTool(definition(), body)], decorators=[Telemetry]).dispatch(
        invocation(), reporter=sink
    )
    assert seen == ["started"]
    assert sink.events == [("effect_started", "call-1", "")]


async def test_a_layer_cannot_mark_a_start_the_tool_never_reported() -> None:
    class Claiming(DispatchLayer):
        async def dispatch(
            self,
            invocation: ToolInvocation,
            *,
            deadline_s: float | None = None,
            reporter: Reporter | None = None,
        ) -> DispatchOutcome:
            assert reporter is not None
            await reporter.effect_started(invocation.call_id)
            return await self.inner.dispatch(invocation, deadline_s=deadline_s, reporter=reporter)

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.fail("bad_input", "refused", effect_started=False)

    sink = RecordingReporter()
    outcome = await ToolDispatcher([FakeTool(definition(), body)], decorators=[Claiming]).dispatch(
        invocation(), reporter=sink
    )
    assert sink.events == []
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


async def test_a_failing_start_mark_does_not_break_the_tool() -> None:
    log: list[str] = []

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        log.append("tool continued")
        return ToolResult.ok("done")

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(
        invocation(), reporter=FailingReporter()
    )
    assert log == ["tool continued"]
    assert outcome.result == ToolResult.ok("done")

"""One test per rule of the one dispatcher (DESIGN §3)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety
from arvis.domain.errors import DefinitionError
from arvis.domain.ids import CallId
from arvis.tools import (
    DispatchFailure,
    DispatchOutcome,
    Reporter,
    ToolDispatcher,
    ToolExecutionError,
    ToolInvocation,
    ToolResult,
    UnknownTool,
)
from tests.support.fakes import (
    FailingReporter,
    FakeTool,
    RecordingReporter,
    definition,
    invocation,
    read_only,
    returns_ok,
)

SECRET = "db password is hunter2"


def only_failure(outcome: DispatchOutcome) -> tuple[str, bool | None, bool]:
    assert outcome.failure is not None, outcome
    return outcome.failure.code, outcome.failure.effect_started, outcome.failure.retryable


async def test_a_tool_result_is_returned_as_the_outcome() -> None:
    dispatcher = ToolDispatcher([FakeTool(definition(), returns_ok)])
    outcome = await dispatcher.dispatch(invocation())
    assert outcome.result == ToolResult.ok({"ok": True})
    assert outcome.boundary is EffectBoundary.EFFECT_COMPLETED


async def test_a_problem_result_that_did_not_start_is_a_result_not_started() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolResult.fail("bad_input", "no such record", effect_started=False)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert outcome.result is not None
    assert outcome.result.is_problem
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


def test_a_tool_whose_name_differs_from_its_definition_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="differs from its definition"):
        ToolDispatcher([FakeTool(definition("demo.tool"), returns_ok, name="other.tool")])


def test_two_tools_of_one_name_in_one_dispatcher_are_rejected() -> None:
    tool = FakeTool(definition(), returns_ok)
    with pytest.raises(DefinitionError, match="declared twice"):
        ToolDispatcher([tool, FakeTool(definition(), returns_ok)])


async def test_an_undeclared_tool_is_refused_before_any_effect() -> None:
    dispatcher = ToolDispatcher([FakeTool(definition(), returns_ok)])
    outcome = await dispatcher.dispatch(invocation("other.tool"))
    assert only_failure(outcome) == ("tool_not_declared", False, False)
    with pytest.raises(UnknownTool):
        dispatcher.definition("other.tool")


async def test_definitions_are_a_snapshot_taken_at_construction() -> None:
    tool = FakeTool(definition(), returns_ok)
    dispatcher = ToolDispatcher([tool])
    tool.definition = definition(description="Changed later.")
    assert dispatcher.definition("demo.tool") == definition()
    with pytest.raises(TypeError):
        dispatcher.definitions["x"] = definition()  # type: ignore[index]


async def test_untyped_exception_is_contained_without_leaking_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise RuntimeError(SECRET)

    with caplog.at_level(logging.ERROR):
        outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("tool_crashed", None, False)
    assert outcome.failure is not None
    assert SECRET not in outcome.failure.message
    assert SECRET not in outcome.model_dump_json()
    assert SECRET in caplog.text  # logged for the operator


async def test_untyped_exception_in_a_read_only_tool_did_not_start_an_effect() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise KeyError("x")

    outcome = await ToolDispatcher([FakeTool(read_only(), body)]).dispatch(invocation("demo.read"))
    assert only_failure(outcome) == ("tool_crashed", False, False)


async def test_typed_error_passes_its_code_message_and_advice_through() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(
            inv.call_id, effect_started=True, retryable=True, code="quota", message="over quota"
        )

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("quota", True, True)
    assert outcome.failure is not None
    assert outcome.failure.message == "over quota"
    assert outcome.boundary is EffectBoundary.EFFECT_FAILED


async def test_a_typed_error_for_another_call_id_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise ToolExecutionError("call-99", effect_started=False, retryable=True)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("call_id_mismatch", None, False)


async def test_progress_for_another_call_id_is_a_violation() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        # A tool swallowing the error must not hide the violation.
        with contextlib.suppress(Exception):
            await rep.progress(CallId("call-99"), "halfway")
        return ToolResult.ok(1)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("call_id_mismatch", None, False)


async def test_uncertain_outcome_from_a_read_only_tool_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise ToolExecutionError(inv.call_id, effect_started=None, retryable=False)

    outcome = await ToolDispatcher([FakeTool(read_only(), body)]).dispatch(invocation("demo.read"))
    assert only_failure(outcome) == ("read_only_uncertain", False, False)


async def test_retry_advice_from_a_replay_unsafe_tool_is_rejected() -> None:
    unsafe = definition(replay_safety=ReplaySafety.UNSAFE)

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise ToolExecutionError(inv.call_id, effect_started=True, retryable=True)

    outcome = await ToolDispatcher([FakeTool(unsafe, body)]).dispatch(invocation())
    assert only_failure(outcome) == ("retry_advice_from_unsafe_tool", True, False)


async def test_an_uncertain_outcome_is_never_retryable() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise ToolExecutionError(inv.call_id, effect_started=None, retryable=True, code="lost")

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("lost", None, False)
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_an_exception_group_is_rejected_as_hiding_a_second_error() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        first = ToolExecutionError(inv.call_id, effect_started=False, retryable=False)
        raise ExceptionGroup("two", [first, ValueError("second")])

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("hidden_second_error", None, False)


async def test_a_wrapped_chain_hiding_a_second_tool_error_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        try:
            raise ToolExecutionError(inv.call_id, effect_started=True, retryable=False)
        except ToolExecutionError as first:
            raise ToolExecutionError(inv.call_id, effect_started=False, retryable=True) from first

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("hidden_second_error", None, False)


async def test_an_untyped_exception_wrapping_a_tool_error_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        try:
            raise ToolExecutionError(inv.call_id, effect_started=False, retryable=True)
        except ToolExecutionError:
            raise RuntimeError("wrapped") from None

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("hidden_second_error", None, False)


async def test_a_typed_error_raised_while_handling_a_plain_exception_is_accepted() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        try:
            {}["missing"]
        except KeyError:
            raise ToolExecutionError(
                inv.call_id, effect_started=False, retryable=True, code="missing"
            ) from None
        return ToolResult.ok(None)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("missing", False, True)


async def test_a_result_and_an_error_together_are_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        both = ToolResult.model_construct(
            value={"done": True},
            problem=ToolResult.fail("x", "y").problem,
        )
        return both

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("result_and_error", None, False)


async def test_an_error_returned_as_a_value_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return ToolExecutionError(inv.call_id, effect_started=False, retryable=True)  # type: ignore[return-value]

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    assert only_failure(outcome) == ("result_and_error", None, False)


async def test_a_return_value_that_is_not_a_tool_result_is_rejected() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        return {"ok": True}  # type: ignore[return-value]

    outcome = await ToolDispatcher([FakeTool(read_only(), body)]).dispatch(invocation("demo.read"))
    assert only_failure(outcome) == ("invalid_tool_result", False, False)


async def test_saying_not_started_after_reporting_start_is_a_contradiction() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        return ToolResult.fail("nope", "did nothing", effect_started=False)

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation())
    # The start report is what the dispatcher saw: started, end unknown.
    assert only_failure(outcome) == ("effect_report_contradiction", True, False)
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_progress_is_forwarded_correlated_by_call_id() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.progress(inv.call_id, "preparing")
        await rep.effect_started(inv.call_id)
        return ToolResult.ok(None)

    sink = RecordingReporter()
    await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation(), reporter=sink)
    assert sink.events == [("progress", "call-1", "preparing"), ("effect_started", "call-1", "")]


async def test_a_failing_reporter_does_not_break_a_successful_tool() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.progress(inv.call_id, "preparing")
        return ToolResult.ok("done")

    outcome = await ToolDispatcher([FakeTool(definition(), body)]).dispatch(
        invocation(), reporter=FailingReporter()
    )
    assert outcome.result == ToolResult.ok("done")


async def test_reporting_and_execution_both_failing_raise_one_dispatch_failure() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        raise ToolExecutionError(inv.call_id, effect_started=True, retryable=False, code="boom")

    sink = FailingReporter()
    with pytest.raises(DispatchFailure) as caught:
        await ToolDispatcher([FakeTool(definition(), body)]).dispatch(invocation(), reporter=sink)
    assert isinstance(caught.value.__cause__, ToolExecutionError)
    assert caught.value.reporter_error is sink.error
    assert caught.value.failure.code == "boom"
    assert caught.value.__context__ is caught.value.__cause__


async def test_cancellation_mid_tool_propagates_and_the_tools_cleanup_ran() -> None:
    entered, cleaned = asyncio.Event(), asyncio.Event()

    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        entered.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.set()
        return ToolResult.ok(None)

    dispatcher = ToolDispatcher([FakeTool(definition(), body)])
    task = asyncio.create_task(dispatcher.dispatch(invocation()))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned.is_set()


async def test_deadline_after_a_reported_start_is_effect_started() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await rep.effect_started(inv.call_id)
        await asyncio.sleep(60)
        return ToolResult.ok(None)

    dispatcher = ToolDispatcher([FakeTool(definition(), body)])
    outcome = await dispatcher.dispatch(invocation(), deadline_s=0.01)
    assert only_failure(outcome) == ("deadline_exceeded", True, False)
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED


async def test_deadline_exceeded_in_a_read_only_tool_did_not_start_an_effect() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        await asyncio.sleep(60)
        return ToolResult.ok(None)

    dispatcher = ToolDispatcher([FakeTool(read_only(), body)], default_deadline_s=0.01)
    outcome = await dispatcher.dispatch(invocation("demo.read"))
    assert only_failure(outcome) == ("deadline_exceeded", False, True)


async def test_a_tools_own_timeout_error_is_not_mistaken_for_the_deadline() -> None:
    async def body(inv: ToolInvocation, rep: Reporter) -> ToolResult:
        raise TimeoutError("upstream")

    dispatcher = ToolDispatcher([FakeTool(definition(), body)])
    outcome = await dispatcher.dispatch(invocation(), deadline_s=5)
    assert only_failure(outcome) == ("tool_crashed", None, False)


async def test_a_misspelled_dispatch_option_is_a_type_error_before_the_call_id_is_taken() -> None:
    tool = FakeTool(definition(), returns_ok)
    dispatcher = ToolDispatcher([tool])
    with pytest.raises(TypeError, match="deadline"):
        await dispatcher.dispatch(invocation(), deadline=0.01)  # type: ignore[call-arg]
    assert tool.calls == 0
    outcome = await dispatcher.dispatch(invocation())
    assert outcome.result is not None
    assert tool.calls == 1

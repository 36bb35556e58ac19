"""How the dispatcher turns the end of a tool body into a trustworthy outcome.

One rule underlies everything here: the dispatcher can never prove that a
*mutating* tool's effect did not start — only the tool can say so, with a
typed error or a problem result carrying ``effect_started=False``. So every
ending the tool did not describe in its own typed terms (an untyped exception,
a protocol violation, a deadline after the body began) is classified
``effect_started=None`` (unknown, never retryable) for a mutating tool, and
``False`` for a read-only tool, which has no effect to start.
"""

from __future__ import annotations

import logging
from typing import Any

from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.ids import CallId
from arvis.tools.base import Reporter, ToolResult
from arvis.tools.errors import CallIdMismatch, ToolExecutionError
from arvis.tools.outcome import DispatchOutcome, ToolFailure

logger = logging.getLogger(__name__)

# Fixed caller-facing texts: a rule violation is described, its exception never quoted.
MESSAGES = {
    "tool_not_declared": "the tool is not declared in this tool plan",
    "tool_crashed": "the tool failed unexpectedly; the server log has the details",
    "call_id_mismatch": "the tool answered for another call id",
    "read_only_uncertain": "a read-only tool reported an uncertain outcome",
    "retry_advice_from_unsafe_tool": "a replay-unsafe tool advised a retry after it may have "
    "started its effect",
    "hidden_second_error": "the tool raised more than one error (a group or a wrapped chain)",
    "result_and_error": "the tool produced a result and an error together",
    "invalid_tool_result": "the tool returned something that is not a tool result",
    "effect_report_contradiction": "the tool said the effect did not start after reporting "
    "that it had",
    "deadline_exceeded": "the tool did not finish before its deadline",
    "dispatch_layer_failed": "a dispatch layer failed unexpectedly; the server log has the details",
    "invalid_layer_outcome": "a dispatch layer answered something that is not a dispatch outcome",
    "plan_retired": "the run's tool plan is no longer current; its tools cannot run",
}


def not_started(code: str, *, retryable: bool = False) -> ToolFailure:
    """A failure that provably happened before any effect."""
    return ToolFailure(code=code, message=MESSAGES[code], effect_started=False, retryable=retryable)


def untrusted(definition: ToolDefinition, code: str) -> ToolFailure:
    """A failure whose effect the tool did not describe in typed terms (module rule)."""
    started = False if definition.read_only else None
    return ToolFailure(code=code, message=MESSAGES[code], effect_started=started, retryable=False)


def deadline_exceeded(definition: ToolDefinition | None, *, body_started: bool) -> ToolFailure:
    """Deadline rule: unknown for a mutating tool whose body began, else not started.

    A mutating body that began may have reached its point of no return whether
    or not it reported so, hence ``None``; nothing can have happened when the
    deadline expired before the body or in a read-only tool, so a retry is safe.
    """
    if definition is None or not body_started or definition.read_only:
        return not_started("deadline_exceeded", retryable=True)
    return untrusted(definition, "deadline_exceeded")


class CallReporter:
    """The reporter one tool call receives: checks, remembers, contains.

    A failing sink never breaks the tool: its first error is kept in
    :attr:`sink_error` for the dispatcher (see ``DispatchFailure``).
    """

    def __init__(self, sink: Reporter | None, call_id: CallId) -> None:
        self._sink = sink
        self.call_id = call_id
        self.started = False
        self.violation: str | None = None
        self.sink_error: BaseException | None = None

    def _check(self, call_id: CallId) -> None:
        if call_id != self.call_id:
            self.violation = self.violation or "call_id_mismatch"
            raise CallIdMismatch(self.call_id, call_id)

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        self._check(call_id)
        if self._sink is not None:
            try:
                await self._sink.progress(call_id, message, data)
            except Exception as exc:  # the sink's failure must not become the tool's
                self._sink_failed(exc)

    async def effect_started(self, call_id: CallId) -> None:
        self._check(call_id)
        self.started = True
        if self._sink is not None:
            try:
                await self._sink.effect_started(call_id)
            except Exception as exc:  # the sink's failure must not become the tool's
                self._sink_failed(exc)

    def _sink_failed(self, exc: Exception) -> None:
        logger.warning("progress reporting failed for call %s", self.call_id, exc_info=exc)
        if self.sink_error is None:
            self.sink_error = exc


def _hides_second_error(exc: BaseException) -> bool:
    """True for a group, or a chain carrying another ToolExecutionError."""
    if isinstance(exc, BaseExceptionGroup):
        return True
    seen = {id(exc)}
    link = exc.__cause__ or exc.__context__
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, ToolExecutionError | BaseExceptionGroup):
            return True
        link = link.__cause__ or link.__context__
    return False


def classify_error(
    definition: ToolDefinition, reporter: CallReporter, exc: ToolExecutionError
) -> ToolFailure:
    """Check a typed error against every rule of DESIGN §3, in a fixed order."""
    if reporter.violation is not None:
        return untrusted(definition, reporter.violation)
    if exc.call_id != reporter.call_id:
        return untrusted(definition, "call_id_mismatch")
    if _hides_second_error(exc):
        return untrusted(definition, "hidden_second_error")
    if definition.read_only and exc.effect_started is None:
        return untrusted(definition, "read_only_uncertain")
    if reporter.started and exc.effect_started is False:
        return untrusted(definition, "effect_report_contradiction")
    if exc.retryable and definition.replay_safety is ReplaySafety.UNSAFE:
        # Even a not-started failure loses its advice: the lifecycle retries
        # EFFECT_NOT_STARTED anyway, and an unsafe tool's advice is never trusted.
        return ToolFailure(
            code="retry_advice_from_unsafe_tool",
            message=MESSAGES["retry_advice_from_unsafe_tool"],
            effect_started=exc.effect_started,
            retryable=False,
        )
    return ToolFailure(
        code=exc.tool_code,
        message=exc.message,
        effect_started=exc.effect_started,
        # Uncertain ⇒ never retryable, whatever the tool advised.
        retryable=exc.retryable and exc.effect_started is not None,
    )


def classify_untyped(
    definition: ToolDefinition, reporter: CallReporter, exc: Exception
) -> ToolFailure:
    if reporter.violation is not None:
        return untrusted(definition, reporter.violation)
    if _hides_second_error(exc):
        return untrusted(definition, "hidden_second_error")
    return untrusted(definition, "tool_crashed")


def classify_return(
    definition: ToolDefinition, reporter: CallReporter, returned: object
) -> DispatchOutcome:
    if isinstance(returned, BaseException):
        return DispatchOutcome(failure=untrusted(definition, "result_and_error"))
    if not isinstance(returned, ToolResult):
        return DispatchOutcome(failure=untrusted(definition, "invalid_tool_result"))
    if returned.problem is not None and returned.value is not None:
        # Only reachable through model_construct, which skips validation.
        return DispatchOutcome(failure=untrusted(definition, "result_and_error"))
    if reporter.violation is not None:
        return DispatchOutcome(failure=untrusted(definition, reporter.violation))
    problem = returned.problem
    if problem is not None and not problem.effect_started and reporter.started:
        return DispatchOutcome(failure=untrusted(definition, "effect_report_contradiction"))
    return DispatchOutcome(result=returned)


def conform(definition: ToolDefinition, outcome: DispatchOutcome) -> DispatchOutcome:
    """Hold an outcome from any layer to the rules a tool's own outcome obeys."""
    failure = outcome.failure
    if failure is None:
        return outcome
    if definition.read_only and failure.effect_started is None:
        return DispatchOutcome(failure=untrusted(definition, "read_only_uncertain"))
    unsafe = definition.replay_safety is ReplaySafety.UNSAFE
    if unsafe and failure.retryable and failure.effect_started is not False:
        return DispatchOutcome(failure=untrusted(definition, "retry_advice_from_unsafe_tool"))
    return outcome

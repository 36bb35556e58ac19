"""How the dispatcher turns the end of a tool body into a trustworthy outcome.

One rule underlies everything here: the dispatcher can never prove that a
*mutating* tool's effect did not start — only the tool can say so, with a
typed error or a problem result carrying ``effect_started=False``. So every
ending the tool did not describe in its own typed terms (an untyped exception,
a protocol violation, a deadline after the body began) is classified
``effect_started=None`` (unknown, never retryable) for a mutating tool, and
``False`` for a read-only tool, which has no effect to start.

The one thing the dispatcher does observe itself is the tool's start report
(``reporter.effect_started``). After it, a mutating tool's effect is known to
have started, so an ending it did not describe — including a typed error that
says "unknown" — is ``EFFECT_STARTED`` (started, end not observed; never
retryable) rather than unknown.
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
    "read_only_accepted": "a read-only tool answered that it accepted asynchronous work",
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
    "second_execution_refused": "the tool already ran for this invocation; a second execution "
    "was refused without running it",
    "invocation_altered": "a dispatch layer altered the frozen invocation; it was refused "
    "without running",
    "dispatch_outside_call": "a dispatch layer called the tool outside its dispatch; it was "
    "refused without running",
    "call_id_reused": "this call id was already dispatched; a tool body never runs twice for "
    "one call",
    "tool_outcome_unobserved": "a dispatch layer answered before the tool finished; the server "
    "log has the details",
}


def not_started(code: str, *, retryable: bool = False) -> ToolFailure:
    """A failure that provably happened before any effect."""
    return ToolFailure(code=code, message=MESSAGES[code], effect_started=False, retryable=retryable)


def untrusted(definition: ToolDefinition, code: str, *, started: bool = False) -> ToolFailure:
    """A failure whose effect the tool did not describe in typed terms (module rule).

    ``started``: the tool had reported its start, so a mutating tool's effect is
    known to have started and its end is what is unknown (``EFFECT_STARTED``).
    """
    if definition.read_only:
        return ToolFailure(code=code, message=MESSAGES[code], effect_started=False, retryable=False)
    return ToolFailure(
        code=code,
        message=MESSAGES[code],
        effect_started=True if started else None,
        end_unobserved=started,
        retryable=False,
    )


def deadline_exceeded(
    definition: ToolDefinition | None, *, body_started: bool, start_reported: bool = False
) -> ToolFailure:
    """Deadline rule: started, else unknown, for a mutating tool whose body began.

    A mutating body that began may have reached its point of no return whether
    or not it reported so, hence unknown — or ``EFFECT_STARTED`` once it did
    report it; nothing can have happened when the deadline expired before the
    body or in a read-only tool, so a retry is safe.
    """
    if definition is None or not body_started or definition.read_only:
        return not_started("deadline_exceeded", retryable=True)
    return untrusted(definition, "deadline_exceeded", started=start_reported)


class CallReporter:
    """The reporter one tool call receives: checks, remembers, contains.

    ``sink`` is the reporter the dispatch layers handed down; ``outer`` is the
    one the top-level dispatch was given. The tool's first ``effect_started`` is
    awaited on ``outer`` first (so its owner can make the start durable before
    the tool continues, even when a layer dropped or replaced the reporter),
    then on ``sink``; later reports are checked, not forwarded. ``progress``
    goes to ``sink``, or to ``outer`` when a layer passed none down.

    A failing sink never breaks the tool: its first error is kept in
    :attr:`sink_error` for the dispatcher (see ``DispatchFailure``).
    """

    def __init__(
        self, sink: Reporter | None, call_id: CallId, *, outer: Reporter | None = None
    ) -> None:
        self._sink = sink
        self._outer = outer
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
        sink = self._sink if self._sink is not None else self._outer
        if sink is not None:
            try:
                await sink.progress(call_id, message, data)
            except Exception as exc:  # the sink's failure must not become the tool's
                self._sink_failed(exc)

    async def effect_started(self, call_id: CallId) -> None:
        self._check(call_id)
        if self.started:
            return
        # Set before awaiting anyone: from this call on the effect may be under way.
        self.started = True
        sinks = [] if self._outer is None else [self._outer]
        if self._sink is not None and self._sink is not self._outer:
            sinks.append(self._sink)
        for sink in sinks:
            try:
                await sink.effect_started(call_id)
            except Exception as exc:  # the sink's failure must not become the tool's
                self._sink_failed(exc)

    def _sink_failed(self, exc: Exception) -> None:
        logger.warning("progress reporting failed for call %s", self.call_id, exc_info=exc)
        if self.sink_error is None:
            self.sink_error = exc


class LayerReporter:
    """What dispatch layers receive in place of the top-level reporter.

    ``progress`` is forwarded; ``effect_started`` is not, because only the tool's
    own report — which the core forwards to the top-level reporter itself —
    may mark a start: a layer cannot claim one, and a layer that wraps this
    reporter causes no second mark.
    """

    def __init__(self, outer: Reporter, call_id: CallId) -> None:
        self.outer = outer
        self.call_id = call_id

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        if call_id != self.call_id:
            raise CallIdMismatch(self.call_id, call_id)
        await self.outer.progress(call_id, message, data)

    async def effect_started(self, call_id: CallId) -> None:
        if call_id != self.call_id:
            raise CallIdMismatch(self.call_id, call_id)


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
    started = reporter.started
    breach = _breach(reporter, exc, exc.call_id)
    if breach is not None:
        return untrusted(definition, breach, started=started)
    if definition.read_only and exc.effect_started is None:
        return untrusted(definition, "read_only_uncertain")
    if started and exc.effect_started is False:
        return untrusted(definition, "effect_report_contradiction", started=True)
    # "Unknown" from a tool that reported its start: the start is known, its end is not.
    end_unobserved = started and exc.effect_started is None
    effect_started = True if end_unobserved else exc.effect_started
    if exc.retryable and definition.replay_safety is ReplaySafety.UNSAFE:
        # Even a not-started failure loses its advice: the lifecycle retries
        # EFFECT_NOT_STARTED anyway, and an unsafe tool's advice is never trusted.
        return ToolFailure(
            code="retry_advice_from_unsafe_tool",
            message=MESSAGES["retry_advice_from_unsafe_tool"],
            effect_started=effect_started,
            end_unobserved=end_unobserved,
            retryable=False,
        )
    return ToolFailure(
        code=exc.tool_code,
        message=exc.message,
        effect_started=effect_started,
        end_unobserved=end_unobserved,
        # Uncertain ⇒ never retryable, whatever the tool advised.
        retryable=exc.retryable and exc.effect_started is not None,
    )


def classify_untyped(
    definition: ToolDefinition, reporter: CallReporter, exc: Exception
) -> ToolFailure:
    breach = _breach(reporter, exc) or "tool_crashed"
    return untrusted(definition, breach, started=reporter.started)


def _breach(reporter: CallReporter, exc: Exception, call_id: str | None = None) -> str | None:
    """The first rule a failed call broke before its error can be believed, or None:
    a reporting violation, another call's id (``call_id``), a hidden second error."""
    if reporter.violation is not None:
        return reporter.violation
    if call_id is not None and call_id != reporter.call_id:
        return "call_id_mismatch"
    if _hides_second_error(exc):
        return "hidden_second_error"
    return None


def classify_return(
    definition: ToolDefinition, reporter: CallReporter, returned: object
) -> DispatchOutcome:
    def refused(code: str) -> DispatchOutcome:
        return DispatchOutcome(failure=untrusted(definition, code, started=reporter.started))

    if isinstance(returned, BaseException):
        return refused("result_and_error")
    if not isinstance(returned, ToolResult):
        return refused("invalid_tool_result")
    if returned.problem is not None and (returned.value is not None or returned.pending):
        # Only reachable through model_construct, which skips validation.
        return refused("result_and_error")
    if reporter.violation is not None:
        return refused(reporter.violation)
    if returned.pending and definition.read_only:
        return refused("read_only_accepted")
    problem = returned.problem
    if problem is not None and not problem.effect_started and reporter.started:
        return refused("effect_report_contradiction")
    return DispatchOutcome(result=returned)


def conform(definition: ToolDefinition, outcome: DispatchOutcome) -> DispatchOutcome:
    """Hold an outcome from any layer to the rules a tool's own outcome obeys."""
    failure = outcome.failure
    if failure is None:
        if definition.read_only and outcome.result is not None and outcome.result.pending:
            return DispatchOutcome(failure=untrusted(definition, "read_only_accepted"))
        return outcome
    if definition.read_only and (failure.effect_started is None or failure.end_unobserved):
        return DispatchOutcome(failure=untrusted(definition, "read_only_uncertain"))
    unsafe = definition.replay_safety is ReplaySafety.UNSAFE
    if unsafe and failure.retryable and failure.effect_started is not False:
        return DispatchOutcome(failure=untrusted(definition, "retry_advice_from_unsafe_tool"))
    return outcome

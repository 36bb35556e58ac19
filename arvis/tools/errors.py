"""Errors of the tool layer.

A tool signals its own failure with exactly one :class:`ToolExecutionError`;
everything else here is raised by ARVIS about tools, plans and dispatch.
"""

from __future__ import annotations

from arvis.domain.errors import ArvisError, ConfigurationError
from arvis.domain.ids import CallId, PlanId
from arvis.tools.limits import FAILURE_CODE, MAX_MESSAGE_CHARS
from arvis.tools.outcome import ToolFailure


class ToolExecutionError(ArvisError):
    """The one error a tool body raises, correlated to the active call id.

    ``effect_started`` is ``True`` (started, then failed), ``False`` (provably
    not started) or ``None`` (unknown). An unknown outcome is never retryable:
    the dispatcher clears ``retryable`` for it. ``tool_code`` and ``message``
    are shown to the caller, so write them for the caller.
    """

    code = "tool_execution_failed"

    def __init__(
        self,
        call_id: CallId | str,
        *,
        effect_started: bool | None,
        retryable: bool,
        code: str = "tool_failed",
        message: str = "the tool failed",
    ) -> None:
        if not FAILURE_CODE.fullmatch(code):
            raise ValueError(f"tool failure code {code!r} must match {FAILURE_CODE.pattern}")
        super().__init__(message[:MAX_MESSAGE_CHARS])
        self.call_id = CallId(call_id)
        self.effect_started = effect_started
        self.retryable = retryable
        self.tool_code = code


class DispatchFailure(ArvisError):
    """Both progress reporting and execution failed for one call.

    ``__cause__`` is the execution error; the reporter's failure is only the
    :attr:`reporter_error` attribute, so it can never be mistaken for the
    effect's outcome. :attr:`failure` is the classified execution failure.
    """

    code = "dispatch_failed"

    def __init__(
        self, call_id: CallId, failure: ToolFailure, reporter_error: BaseException
    ) -> None:
        super().__init__(
            f"call {call_id}: the tool failed ({failure.code}) and progress reporting failed too"
        )
        self.call_id = call_id
        self.failure = failure
        self.reporter_error = reporter_error


class UnknownTool(ArvisError):
    """A name that the plan does not declare."""

    code = "tool_not_declared"

    def __init__(self, tool: str) -> None:
        super().__init__(f"tool {tool!r} is not declared in this tool plan")
        self.tool = tool


class CallIdMismatch(ArvisError):
    """A tool reported progress for a call id that is not its active call."""

    code = "call_id_mismatch"

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"reported for call {got!r} while the active call is {expected!r}")
        self.expected = expected
        self.got = got


class DecoratorError(ConfigurationError):
    """A dispatch decorator is unusable; the dispatcher is not built."""

    code = "decorator_invalid"

    def __init__(self, position: int, decorator: str, rule: str) -> None:
        super().__init__(f"dispatch decorator #{position} ({decorator}): {rule}")
        self.position = position
        self.decorator = decorator
        self.rule = rule


class PlanError(ArvisError):
    """A tool plan could not be leased, loaded or trusted."""

    code = "plan_error"


class PlanNotFound(PlanError):
    """No plan with this id was ever persisted."""

    code = "plan_not_found"

    def __init__(self, plan_id: PlanId) -> None:
        super().__init__(f"tool plan {plan_id} is unknown")
        self.plan_id = plan_id


class PlanMismatch(PlanError):
    """A source returned another plan than the one asked for, or a corrupt one."""

    code = "plan_mismatch"

    def __init__(self, wanted: PlanId | None, got: PlanId, reason: str) -> None:
        super().__init__(f"tool plan {got}: {reason} (wanted {wanted or 'the current plan'})")
        self.wanted = wanted
        self.got = got


class PlanUnavailable(PlanError):
    """The plan source failed; its text is logged, not shown."""

    code = "plan_unavailable"

    def __init__(self, wanted: PlanId | None) -> None:
        super().__init__(f"the tool plan source failed to lease {wanted or 'the current plan'}")
        self.wanted = wanted


class CanonicalFormRefused(ArvisError):
    """A tool's ``canonical`` hook refused the payload, or failed: nothing is admitted.

    Admission answers it as a ``payload_invalid`` refusal (DESIGN §10): policy can
    only decide on the form the tool acts on, and this payload has none.
    """

    code = "payload_invalid"

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(f"tool {tool!r} cannot act on this payload: {reason}")
        self.tool = tool
        self.reason = reason

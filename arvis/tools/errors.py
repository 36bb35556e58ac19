"""Errors of the tool layer.

A tool signals its own failure with exactly one :class:`ToolExecutionError`;
everything else here is raised by ARVIS about tools, plans and dispatch.
"""

from __future__ import annotations

from typing import Any

from arvis.domain.errors import ArvisError, ConfigurationError, fields
from arvis.domain.ids import CallId, PlanId
from arvis.tools.limits import FAILURE_CODE, MAX_MESSAGE_CHARS
from arvis.tools.outcome import ToolFailure


class ToolExecutionError(ArvisError, code="tool_execution_failed"):
    """The one error a tool body raises, correlated to the active call id.

    ``effect_started`` is ``True`` (started, then failed), ``False`` (provably
    not started) or ``None`` (unknown). An unknown outcome is never retryable:
    the dispatcher clears ``retryable`` for it. ``tool_code`` and ``message``
    are shown to the caller, so write them for the caller.
    """

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


@fields
class DispatchFailure(ArvisError, code="dispatch_failed"):
    """Both progress reporting and execution failed for one call.

    ``__cause__`` is the execution error; the reporter's failure is only the
    :attr:`reporter_error` attribute, so it can never be mistaken for the
    effect's outcome. :attr:`failure` is the classified execution failure.
    """

    template = "call {call_id}: the tool failed ({failure.code}) and progress reporting failed too"
    call_id: CallId
    failure: ToolFailure
    reporter_error: BaseException


@fields
class UnknownTool(ArvisError, code="tool_not_declared"):
    """A name that the plan does not declare."""

    template = "tool {tool!r} is not declared in this tool plan"
    tool: str


@fields
class CallIdMismatch(ArvisError, code="call_id_mismatch"):
    """A tool reported progress for a call id that is not its active call."""

    template = "reported for call {got!r} while the active call is {expected!r}"
    expected: str
    got: str


@fields
class DecoratorError(ConfigurationError, code="decorator_invalid"):
    """A dispatch decorator is unusable; the dispatcher is not built."""

    template = "dispatch decorator #{position} ({decorator}): {rule}"
    position: int
    decorator: str
    rule: str


class PlanError(ArvisError, code="plan_error"):
    """A tool plan could not be leased, loaded or trusted."""

    def describe(self, values: dict[str, Any]) -> str:
        wanted = values.get("wanted") or "the current plan"
        return self.template.format_map({**values, "wanted": wanted})


@fields
class PlanNotFound(PlanError, code="plan_not_found"):
    """No plan with this id was ever persisted."""

    template = "tool plan {plan_id} is unknown"
    plan_id: PlanId


@fields
class PlanMismatch(PlanError, code="plan_mismatch"):
    """A source returned another plan than the one asked for, or a corrupt one."""

    template = "tool plan {got}: {reason} (wanted {wanted})"
    wanted: PlanId | None
    got: PlanId
    reason: str


@fields
class PlanUnavailable(PlanError, code="plan_unavailable"):
    """The plan source failed; its text is logged, not shown."""

    template = "the tool plan source failed to lease {wanted}"
    wanted: PlanId | None


@fields
class CanonicalFormRefused(ArvisError, code="payload_invalid"):
    """A tool's ``canonical`` hook refused the payload, or failed: nothing is admitted.

    Admission answers it as a ``payload_invalid`` refusal (DESIGN §10): policy can
    only decide on the form the tool acts on, and this payload has none.
    """

    template = "tool {tool!r} cannot act on this payload: {reason}"
    tool: str
    reason: str

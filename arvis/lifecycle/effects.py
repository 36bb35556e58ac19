"""EffectDispatcher: the frozen invocation runs through the plan's one dispatcher, with
no transaction open, after its admission committed.

While the tool runs, its start report is made durable before the tool goes on
(recovery then journals ``EFFECT_STARTED`` for a crash after it), and a
dispatch that is cancelled still ends in an outcome the lifecycle journals:
an interrupted call is never left as a stuck intent in a live process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from arvis.domain.definitions import ToolDefinition
from arvis.domain.ids import CallId, IdempotencyKey, TenantId
from arvis.domain.intent import Intent
from arvis.tools.base import ToolInvocation
from arvis.tools.errors import DispatchFailure
from arvis.tools.layers import Dispatcher
from arvis.tools.outcome import DispatchOutcome, ToolFailure

log = logging.getLogger(__name__)

MarkStarted = Callable[[TenantId, IdempotencyKey, int], Awaitable[None]]
"""Writes the attempt's ``started_at`` in a statement of its own (one round trip)."""

# How long a tool waits for its start mark before it goes on without it. A lost
# mark only makes recovery say "unknown" instead of "started": still uncertain.
START_MARK_TIMEOUT_S = 2.0


class StartReporter:
    """The reporter the lifecycle hands the dispatcher for one attempt."""

    def __init__(self, intent: Intent, mark: MarkStarted | None, durable: bool) -> None:
        self._intent = intent
        self._mark = mark if durable else None
        self.started = False

    async def progress(self, call_id: CallId, message: str, data: Any = None) -> None:
        return None

    async def effect_started(self, call_id: CallId) -> None:
        self.started = True
        if self._mark is None:
            return
        intent = self._intent
        try:
            await asyncio.wait_for(
                self._mark(intent.context.tenant_id, intent.idempotency_key, intent.attempt),
                START_MARK_TIMEOUT_S,
            )
        except Exception as exc:  # the tool must go on; see START_MARK_TIMEOUT_S
            log.warning("start mark of intent %s not recorded: %s", intent.intent_id, exc)


class EffectDispatcher:
    def __init__(self, default_deadline_s: float, mark_started: MarkStarted | None = None) -> None:
        self.default_deadline_s = default_deadline_s
        self.mark_started = mark_started

    async def dispatch(
        self, dispatcher: Dispatcher, intent: Intent, definition: ToolDefinition | None
    ) -> tuple[DispatchOutcome, bool]:
        """Run the frozen invocation; answer its outcome and whether it was cancelled.

        Call only after the admission has committed. A cancellation is not
        swallowed: the caller journals the outcome answered here, then re-raises.
        """
        invocation = ToolInvocation(
            tool=intent.tool,
            payload=intent.payload,
            context=intent.context,
            idempotency_key=intent.idempotency_key,
            call_id=CallId(intent.intent_id),
        )
        # A read-only tool has no effect to start: its report needs no mark.
        durable = definition is not None and not definition.read_only
        reporter = StartReporter(intent, self.mark_started, durable)
        try:
            outcome = await dispatcher.dispatch(
                invocation, deadline_s=self.default_deadline_s, reporter=reporter
            )
        except DispatchFailure as failure:
            # Reporting and execution both failed: the execution's classification
            # is what happened to the effect.
            return DispatchOutcome(failure=failure.failure), False
        except asyncio.CancelledError:
            return interrupted(definition, started=reporter.started), True
        return outcome, False


def interrupted(definition: ToolDefinition | None, *, started: bool) -> DispatchOutcome:
    """The outcome of a dispatch cut off before the tool answered: EFFECT_STARTED when
    the tool had reported its start, else unknown (a read-only tool: not started)."""
    read_only = definition is not None and definition.read_only
    effect_started: bool | None = False if read_only else (True if started else None)
    return DispatchOutcome(
        failure=ToolFailure(
            code="dispatch_interrupted",
            message="the call was interrupted before the tool answered",
            effect_started=effect_started,
            end_unobserved=bool(effect_started),
            retryable=False,
        )
    )


def not_dispatched(code: str, message: str) -> DispatchOutcome:
    """The outcome of an admitted attempt that this process chose not to run."""
    return DispatchOutcome(
        failure=ToolFailure(code=code, message=message, effect_started=False, retryable=False)
    )

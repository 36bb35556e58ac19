"""One top-level dispatch as every layer sees it (rules: :mod:`arvis.tools.dispatcher`).

The frozen original the dispatch received, whether and how its tool body ran,
the recently dispatched call ids, and the reconciliation of the stack's answer
with the body's own outcome.
"""

from __future__ import annotations

from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field

from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import ToolDefinition
from arvis.domain.payload import FrozenEffectPayload
from arvis.tools.base import Reporter, ToolInvocation
from arvis.tools.classify import CallReporter, untrusted
from arvis.tools.outcome import DispatchOutcome, ToolFailure

DEFAULT_CALL_MEMORY = 4096

_CAUTION = {
    EffectBoundary.PRE_EFFECT_REFUSAL: 0,
    EffectBoundary.EFFECT_NOT_STARTED: 0,
    EffectBoundary.EFFECT_FAILED: 1,
    EffectBoundary.EFFECT_COMPLETED: 1,
    EffectBoundary.EFFECT_STARTED: 2,
    EffectBoundary.EFFECT_STATE_UNKNOWN: 2,
}


def _same(expected: object, got: object) -> bool:
    # Exact types: a subclass could answer == for a value it does not hold.
    return type(got) is type(expected) and got == expected


@dataclass(frozen=True, slots=True)
class Frozen:
    """Immutable copies of what the top-level dispatch received."""

    tool: str
    canonical: bytes
    digest: str
    idempotency_key: str
    context_fields: dict[str, object]
    """A copy of the context's field values (each immutable: strings, a tuple)."""
    call_id: str

    @classmethod
    def of(cls, invocation: ToolInvocation) -> Frozen:
        return cls(
            tool=invocation.tool,
            canonical=invocation.payload.canonical,
            digest=invocation.payload.digest,
            idempotency_key=invocation.idempotency_key,
            context_fields=dict(vars(invocation.context)),
            call_id=invocation.call_id,
        )

    def altered(self, invocation: object) -> str | None:
        """The first part of ``invocation`` that differs from the original, if any."""
        if type(invocation) is not ToolInvocation:
            return "invocation"
        if type(invocation.tool) is not str:
            return "invocation"
        if invocation.tool != self.tool:
            return "tool"
        payload = invocation.payload
        if type(payload) is not FrozenEffectPayload or not (
            _same(self.canonical, payload.canonical) and _same(self.digest, payload.digest)
        ):
            return "payload"
        if not _same(self.idempotency_key, invocation.idempotency_key):
            return "idempotency_key"
        context = invocation.context
        if type(context) is not AuthorizedEffectContext or vars(context) != self.context_fields:
            return "context"
        if not _same(self.call_id, invocation.call_id):
            return "call_id"
        return None


@dataclass(eq=False)
class CallState:
    """One top-level dispatch, shared by every layer through :data:`CALL`."""

    owner: object
    frozen: Frozen
    reporter: Reporter | None
    body_started: bool = False
    """Set once the core is about to enter the tool body: before that, no
    failure anywhere in the stack can have started an effect."""
    first: DispatchOutcome | None = None
    """The body's own classified outcome, once it finished."""
    call: CallReporter | None = field(default=None, repr=False)
    closed: bool = False

    @property
    def start_reported(self) -> bool:
        return self.call is not None and self.call.started


CALL: ContextVar[CallState | None] = ContextVar("arvis_tool_call", default=None)


def current(owner: object) -> CallState | None:
    state = CALL.get()
    if state is None or state.owner is not owner or state.closed:
        return None
    return state


class RecentCalls:
    """Call ids dispatched here: every one in flight, and the last ``capacity`` finished."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._in_flight: set[str] = set()
        self._finished: OrderedDict[str, None] = OrderedDict()

    def begin(self, call_id: str) -> bool:
        if call_id in self._in_flight or call_id in self._finished:
            return False
        self._in_flight.add(call_id)
        return True

    def end(self, call_id: str) -> None:
        self._in_flight.discard(call_id)
        self._finished[call_id] = None
        while len(self._finished) > self._capacity:
            self._finished.popitem(last=False)


def final_answer(
    state: CallState, definition: ToolDefinition, answered: DispatchOutcome
) -> DispatchOutcome:
    """The dispatch's answer: never less cautious than what its one execution showed.

    The body's own outcome stands unless the stack answered something strictly
    more cautious; a body that began without finishing is at least an ending
    the tool did not describe; and an uncertain answer after the tool reported
    its start says the start is known.
    """
    if state.body_started:
        first = state.first
        if first is None:
            unobserved = DispatchOutcome(
                failure=untrusted(
                    definition, "tool_outcome_unobserved", started=state.start_reported
                )
            )
            if _CAUTION[answered.boundary] < _CAUTION[unobserved.boundary]:
                answered = unobserved
        elif _CAUTION[answered.boundary] <= _CAUTION[first.boundary]:
            answered = first
    failure = answered.failure
    if (
        failure is not None
        and failure.effect_started is None
        and state.start_reported
        and not definition.read_only
    ):
        known = ToolFailure(
            code=failure.code,
            message=failure.message,
            effect_started=True,
            end_unobserved=True,
            retryable=False,
        )
        answered = DispatchOutcome(failure=known)
    return answered

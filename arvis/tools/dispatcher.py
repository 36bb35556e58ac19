"""The one executor (DESIGN §3): every route to a tool body goes through here.

**One capability, at most one execution.** A top-level :meth:`ToolDispatcher.dispatch`
opens one call: the frozen original it received (tool, payload bytes and
digest, idempotency key, context, call id) and what happened to its body.

- The core enters a tool body at most once per call. A second attempt by any
  layer (a retry decorator, a layer calling ``inner.dispatch`` twice or
  concurrently) is refused without running: ``second_execution_refused``, not
  started. A call id that this dispatcher has already dispatched is refused
  before any layer runs: ``call_id_reused``, classified like an ending the tool
  did not describe (unknown for a mutating tool), because the earlier
  dispatch's outcome is not known here. The lifecycle dispatches each attempt
  under a fresh call id (its intent id), so the dispatcher remembers the ids
  in flight plus the last ``call_memory`` finished ones: memory stays bounded,
  and the durable guarantee is the capability's single use in the database.
- Every layer's guard compares the invocation it is handed with the frozen
  original; a difference never reaches the body: ``invocation_altered`` (or
  ``tool_not_declared`` for a name outside the plan), not started, with a fixed
  message. A layer calling the stack outside its call (after it answered, or
  from a context that does not carry it) is refused: ``dispatch_outside_call``.
- **The final answer never claims less than the body's outcome.** Once the
  body ran, its classified outcome (the first and only execution's) is what
  happened to the effect. The stack's answer replaces it only when it is
  strictly more cautious — ranked ``EFFECT_NOT_STARTED`` < ``EFFECT_FAILED`` =
  ``EFFECT_COMPLETED`` < ``EFFECT_STARTED`` = ``EFFECT_STATE_UNKNOWN`` — so a
  layer may turn a result into an uncertain failure (as a layer that raises
  after the body does, or a deadline that expires in an outer layer) but can
  never turn it into a refusal or into another outcome of the same rank
  (another result, a retryable failure). A retry decorator that got an
  uncertain failure, retried and got ``second_execution_refused`` therefore
  answers the uncertain failure; one whose first run completed answers that
  result; one whose first run provably did not start answers that. A body
  that began and had not finished when the stack answered (a layer that
  abandoned it) is at least ``tool_outcome_unobserved``, classified like an
  undescribed ending. A layer that swallows a ``DispatchFailure`` gets the
  same treatment: the body's classified failure is the floor. An
  uncertain answer for a mutating tool that reported its start is
  ``EFFECT_STARTED``: the start report is a fact the dispatcher observed.

**The start report.** The tool's first ``reporter.effect_started`` is awaited on
the reporter given to the top-level dispatch before the tool continues, whatever
the layers passed down; layers receive a reporter that forwards progress but
cannot mark a start. A failing reporter never breaks the tool.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Unpack

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import DefinitionError
from arvis.tools.base import Canonical, Reconcile, Tool, ToolInvocation
from arvis.tools.calls import (
    CALL,
    DEFAULT_CALL_MEMORY,
    CallState,
    Frozen,
    RecentCalls,
    current,
    final_answer,
)
from arvis.tools.classify import (
    CallReporter,
    LayerReporter,
    classify_error,
    classify_return,
    classify_untyped,
    conform,
    deadline_exceeded,
    not_started,
    untrusted,
)
from arvis.tools.errors import DecoratorError, DispatchFailure, ToolExecutionError, UnknownTool
from arvis.tools.layers import DispatchDecorator, Dispatcher, DispatchOptions
from arvis.tools.outcome import DispatchOutcome, ToolFailure

logger = logging.getLogger(__name__)

_OPTIONS = DispatchOptions.__optional_keys__


def _unknown(options: Mapping[str, object]) -> TypeError:
    """What a keyword outside DispatchOptions raises, as it did when each was spelled out:
    a misspelled deadline must not pass for the default one."""
    names = ", ".join(sorted(options.keys() - _OPTIONS))
    return TypeError(f"dispatch() got unexpected keyword arguments: {names}")


class _Core:
    """The innermost layer: runs the tool body once and classifies how it ended."""

    def __init__(
        self, tools: Mapping[str, Tool], snapshot: Mapping[str, ToolDefinition], owner: object
    ) -> None:
        self._tools = tools
        self.definitions = snapshot
        self._owner = owner

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome:
        state = current(self._owner)
        if state is None:  # only its guard calls the core, and it checked; never fail open
            return DispatchOutcome(failure=not_started("dispatch_outside_call"))
        if state.body_started:
            logger.error("a dispatch layer tried to run call %s a second time", invocation.call_id)
            return DispatchOutcome(failure=not_started("second_execution_refused"))
        # Claimed before the first await, so concurrent attempts cannot both enter.
        state.body_started = True
        call = CallReporter(options.get("reporter"), invocation.call_id, outer=state.reporter)
        state.call = call
        try:
            outcome = await self._execute(invocation, call)
        except DispatchFailure as failure:
            state.first = DispatchOutcome(failure=failure.failure)
            raise
        state.first = outcome
        return outcome

    async def _execute(self, invocation: ToolInvocation, call: CallReporter) -> DispatchOutcome:
        tool = self._tools[invocation.tool]  # the guard above has checked the name
        definition = self.definitions[invocation.tool]
        try:
            pending = tool.execute(invocation, call)
            if not inspect.isawaitable(pending):
                return DispatchOutcome(failure=untrusted(definition, "invalid_tool_result"))
            returned = await pending
        except ToolExecutionError as exc:
            return _failed(invocation, call, classify_error(definition, call, exc), exc)
        except Exception as exc:  # contained: a tool's bug is classified and logged, never shown
            logger.error(
                "tool %s raised an untyped exception on call %s",
                invocation.tool,
                invocation.call_id,
                exc_info=exc,
            )
            return _failed(invocation, call, classify_untyped(definition, call, exc), exc)
        return classify_return(definition, call, returned)


def _failed(
    invocation: ToolInvocation, call: CallReporter, failure: ToolFailure, exc: Exception
) -> DispatchOutcome:
    """A tool body's classified failure; called while handling ``exc``. When progress
    reporting failed too, both are one :class:`DispatchFailure` caused by ``exc``."""
    if call.sink_error is not None:
        raise DispatchFailure(invocation.call_id, failure, call.sink_error) from exc
    return DispatchOutcome(failure=failure)


class _Guard:
    """Checks one layer against the call's frozen original and the plan's snapshot."""

    def __init__(
        self, inner: Dispatcher, snapshot: Mapping[str, ToolDefinition], owner: object
    ) -> None:
        self._inner = inner
        self.definitions = snapshot
        self._owner = owner

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome:
        if not options.keys() <= _OPTIONS:
            raise _unknown(options)  # into the layer that called, whose guard contains it
        state = current(self._owner)
        if state is None:
            logger.error("a dispatch layer called the stack outside a dispatch")
            return DispatchOutcome(failure=not_started("dispatch_outside_call"))
        altered = state.frozen.altered(invocation)
        if altered is not None:
            logger.error(
                "a dispatch layer altered the %s of call %s; refused", altered, state.frozen.call_id
            )
            if altered == "tool" and invocation.tool not in self.definitions:
                return DispatchOutcome(failure=not_started("tool_not_declared"))
            return DispatchOutcome(failure=not_started("invocation_altered"))
        definition = self.definitions.get(invocation.tool)
        if definition is None:
            return DispatchOutcome(failure=not_started("tool_not_declared"))
        try:
            outcome = await self._inner.dispatch(invocation, **options)
        except DispatchFailure:
            raise
        except Exception as exc:  # contained like a tool's: a layer is code we did not write
            logger.error("dispatch layer failed on call %s", invocation.call_id, exc_info=exc)
            if not state.body_started:
                return DispatchOutcome(failure=not_started("dispatch_layer_failed"))
            return DispatchOutcome(
                failure=untrusted(definition, "dispatch_layer_failed", started=state.start_reported)
            )
        if not isinstance(outcome, DispatchOutcome):
            return DispatchOutcome(
                failure=untrusted(definition, "invalid_layer_outcome", started=state.start_reported)
            )
        return conform(definition, outcome)


class ToolDispatcher:
    """The canonical name → tool map, a definition snapshot, and the decorated stack.

    ``decorators`` wrap the dispatcher in declared order (first = outermost).
    Construction fails when a tool's name differs from its definition's, a
    name is declared twice, or a decorator is ``None``, raises while wrapping,
    returns ``None`` or changes a definition. ``call_memory`` is how many
    finished call ids are remembered to refuse a reused one (module docstring).
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        decorators: Sequence[DispatchDecorator | None] = (),
        default_deadline_s: float | None = None,
        call_memory: int = DEFAULT_CALL_MEMORY,
    ) -> None:
        by_name: dict[str, Tool] = {}
        snapshot: dict[str, ToolDefinition] = {}
        destinations: dict[str, str] = {}
        reconcilers: dict[str, Reconcile] = {}
        canonicals: dict[str, Canonical] = {}
        for tool in tools:
            name, definition = tool.name, tool.definition
            if not isinstance(definition, ToolDefinition):
                raise DefinitionError(str(name), "definition must be a ToolDefinition")
            if name != definition.name:
                raise DefinitionError(
                    str(name), f"tool name differs from its definition's name {definition.name!r}"
                )
            if name in by_name:
                raise DefinitionError(name, "declared twice in one dispatcher")
            by_name[name] = tool
            # Read once: a tool whose property later answers differently changes nothing.
            snapshot[name] = definition
            destination = _fixed_destination(tool)
            if destination is not None:
                destinations[name] = destination
            hook = getattr(tool, "reconcile", None)
            if callable(hook):
                reconcilers[name] = hook
            rewrite = getattr(tool, "canonical", None)
            if rewrite is not None:
                if not callable(rewrite):
                    raise DefinitionError(name, "canonical must be a function of the payload")
                canonicals[name] = rewrite
        if call_memory < 0:
            raise ValueError("call_memory must not be negative")
        self._snapshot: Mapping[str, ToolDefinition] = MappingProxyType(
            dict(sorted(snapshot.items()))
        )
        self._destinations: Mapping[str, str] = MappingProxyType(destinations)
        self._reconcilers: Mapping[str, Reconcile] = MappingProxyType(reconcilers)
        self._canonicals: Mapping[str, Canonical] = MappingProxyType(canonicals)
        self._default_deadline_s = default_deadline_s
        self._calls = RecentCalls(call_memory)
        # Identifies this dispatcher's calls, so no layer of another stack passes for ours.
        self._owner = object()
        core = _Core(by_name, self._snapshot, self._owner)
        layer: Dispatcher = _Guard(core, self._snapshot, self._owner)
        # Applied innermost first so that the first declared decorator ends outermost.
        for position in range(len(decorators), 0, -1):
            wrapped = self._wrap(position, decorators[position - 1], layer)
            layer = _Guard(wrapped, self._snapshot, self._owner)
        self._outer = layer

    def _wrap(
        self, position: int, decorator: DispatchDecorator | None, inner: Dispatcher
    ) -> Dispatcher:
        if decorator is None:
            raise DecoratorError(position, "None", "a decorator may not be None")
        label = getattr(decorator, "__qualname__", type(decorator).__qualname__)
        try:
            wrapped = decorator(inner)
        except Exception as exc:
            raise DecoratorError(position, label, f"raised while wrapping: {exc!r}") from exc
        if wrapped is None:
            raise DecoratorError(position, label, "returned None")
        try:
            theirs = {name: d.fingerprint for name, d in wrapped.definitions.items()}
        except Exception as exc:
            raise DecoratorError(position, label, f"definitions unreadable: {exc!r}") from exc
        if theirs != {name: d.fingerprint for name, d in self._snapshot.items()}:
            raise DecoratorError(position, label, "changed the tool definitions")
        if not callable(getattr(wrapped, "dispatch", None)):
            raise DecoratorError(position, label, "returned a layer without dispatch()")
        return wrapped

    @property
    def definitions(self) -> Mapping[str, ToolDefinition]:
        """Read-only snapshot, name → definition, sorted by name."""
        return self._snapshot

    def destination(self, name: str) -> str | None:
        """The URL every call of ``name`` reaches, whatever its payload, or None.

        A tool states it as a ``destination`` attribute (a declared HTTP tool's
        ``url``); it is read once, at construction, like the definition. The
        egress gate checks this, not the payload, for such a tool.
        """
        return self._destinations.get(name)

    def reconciler(self, name: str) -> Reconcile | None:
        """The tool's ``reconcile`` hook (issue 16), read once at construction, or None."""
        return self._reconcilers.get(name)

    def canonicalizer(self, name: str) -> Canonical | None:
        """The tool's ``canonical`` hook (DESIGN §10), read once at construction, or None:
        what admission asks for the form of a payload that policy decides on."""
        return self._canonicals.get(name)

    def definition(self, name: str) -> ToolDefinition:
        """The definition of ``name``; :class:`UnknownTool` when the plan lacks it."""
        try:
            return self._snapshot[name]
        except KeyError:
            raise UnknownTool(name) from None

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome:
        """Run ``invocation`` through every layer to its tool body.

        Always answers a :class:`DispatchOutcome` — untyped exceptions, rule
        violations and an expired deadline become a classified failure — except
        that ``asyncio.CancelledError`` propagates unchanged and a failing body
        whose progress reporting also failed raises :class:`DispatchFailure`.
        ``deadline_s`` (else the default) bounds the whole stack; see
        :func:`arvis.tools.classify.deadline_exceeded` for its classification.
        """
        if not options.keys() <= _OPTIONS:
            raise _unknown(options)
        deadline = options.get("deadline_s")
        if deadline is None:
            deadline = self._default_deadline_s
        reporter = options.get("reporter")
        definition = self._snapshot.get(invocation.tool)
        if not self._calls.begin(invocation.call_id):
            logger.error("call %s was dispatched again; refused", invocation.call_id)
            failure = (
                not_started("call_id_reused")
                if definition is None
                else untrusted(definition, "call_id_reused")
            )
            return DispatchOutcome(failure=failure)
        # ``options`` is this call's own kwargs dict: the layers get it with the
        # deadline in force and a reporter that cannot mark the start, and every
        # other option as given.
        options["deadline_s"] = deadline
        options["reporter"] = (
            None if reporter is None else LayerReporter(reporter, invocation.call_id)
        )
        state = CallState(owner=self._owner, frozen=Frozen.of(invocation), reporter=reporter)
        token = CALL.set(state)
        scope = asyncio.timeout(deadline)
        try:
            try:
                async with scope:
                    answered = await self._outer.dispatch(invocation, **options)
            except TimeoutError:
                if not scope.expired():
                    raise
                answered = DispatchOutcome(
                    failure=deadline_exceeded(
                        definition,
                        body_started=state.body_started,
                        start_reported=state.start_reported,
                    )
                )
            if definition is None:
                return answered
            return final_answer(state, definition, answered)
        finally:
            # A layer's task that outlives the call can no longer reach the body.
            state.closed = True
            CALL.reset(token)
            self._calls.end(invocation.call_id)


def _fixed_destination(tool: Tool) -> str | None:
    destination = getattr(tool, "destination", None)
    if destination is not None and not (isinstance(destination, str) and destination):
        raise DefinitionError(tool.name, "destination must be a URL string or None")
    return destination

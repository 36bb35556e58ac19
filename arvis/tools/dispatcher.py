"""The one executor (DESIGN §3): every route to a tool body goes through here."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import DefinitionError
from arvis.tools.base import Reporter, Tool, ToolInvocation
from arvis.tools.classify import (
    CallReporter,
    classify_error,
    classify_return,
    classify_untyped,
    conform,
    deadline_exceeded,
    not_started,
    untrusted,
)
from arvis.tools.errors import DecoratorError, DispatchFailure, ToolExecutionError, UnknownTool
from arvis.tools.layers import DispatchDecorator, Dispatcher
from arvis.tools.outcome import DispatchOutcome

logger = logging.getLogger(__name__)


@dataclass
class _CallState:
    # Set once the innermost layer is about to enter a tool body: before that,
    # no failure anywhere in the stack can have started an effect.
    body_started: bool = False


_CALL: ContextVar[_CallState | None] = ContextVar("arvis_tool_call", default=None)


class _Core:
    """The innermost layer: runs the tool body and classifies how it ended."""

    def __init__(self, tools: Mapping[str, Tool], snapshot: Mapping[str, ToolDefinition]) -> None:
        self._tools = tools
        self.definitions = snapshot

    async def dispatch(
        self,
        invocation: ToolInvocation,
        *,
        deadline_s: float | None = None,
        reporter: Reporter | None = None,
    ) -> DispatchOutcome:
        tool = self._tools[invocation.tool]  # the guard above has checked the name
        definition = self.definitions[invocation.tool]
        state = _CALL.get()
        if state is not None:
            state.body_started = True
        call = CallReporter(reporter, invocation.call_id)
        try:
            pending = tool.execute(invocation, call)
            if not inspect.isawaitable(pending):
                return DispatchOutcome(failure=untrusted(definition, "invalid_tool_result"))
            returned = await pending
        except ToolExecutionError as exc:
            failure = classify_error(definition, call, exc)
            if call.sink_error is not None:
                raise DispatchFailure(invocation.call_id, failure, call.sink_error) from exc
            return DispatchOutcome(failure=failure)
        except Exception as exc:  # contained: a tool's bug is classified and logged, never shown
            logger.error(
                "tool %s raised an untyped exception on call %s",
                invocation.tool,
                invocation.call_id,
                exc_info=exc,
            )
            failure = classify_untyped(definition, call, exc)
            if call.sink_error is not None:
                raise DispatchFailure(invocation.call_id, failure, call.sink_error) from exc
            return DispatchOutcome(failure=failure)
        return classify_return(definition, call, returned)


class _Guard:
    """Checks one layer against the plan's definition snapshot, in and out."""

    def __init__(self, inner: Dispatcher, snapshot: Mapping[str, ToolDefinition]) -> None:
        self._inner = inner
        self.definitions = snapshot

    async def dispatch(
        self,
        invocation: ToolInvocation,
        *,
        deadline_s: float | None = None,
        reporter: Reporter | None = None,
    ) -> DispatchOutcome:
        definition = self.definitions.get(invocation.tool)
        if definition is None:
            return DispatchOutcome(failure=not_started("tool_not_declared"))
        try:
            outcome = await self._inner.dispatch(
                invocation, deadline_s=deadline_s, reporter=reporter
            )
        except DispatchFailure:
            raise
        except Exception as exc:  # contained like a tool's: a layer is code we did not write
            logger.error("dispatch layer failed on call %s", invocation.call_id, exc_info=exc)
            state = _CALL.get()
            if state is not None and not state.body_started:
                return DispatchOutcome(failure=not_started("dispatch_layer_failed"))
            return DispatchOutcome(failure=untrusted(definition, "dispatch_layer_failed"))
        if not isinstance(outcome, DispatchOutcome):
            return DispatchOutcome(failure=untrusted(definition, "invalid_layer_outcome"))
        return conform(definition, outcome)


class ToolDispatcher:
    """The canonical name → tool map, a definition snapshot, and the decorated stack.

    ``decorators`` wrap the dispatcher in declared order (first = outermost).
    Construction fails when a tool's name differs from its definition's, a
    name is declared twice, or a decorator is ``None``, raises while wrapping,
    returns ``None`` or changes a definition.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        decorators: Sequence[DispatchDecorator | None] = (),
        default_deadline_s: float | None = None,
    ) -> None:
        by_name: dict[str, Tool] = {}
        snapshot: dict[str, ToolDefinition] = {}
        destinations: dict[str, str] = {}
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
        self._snapshot: Mapping[str, ToolDefinition] = MappingProxyType(
            dict(sorted(snapshot.items()))
        )
        self._destinations: Mapping[str, str] = MappingProxyType(destinations)
        self._default_deadline_s = default_deadline_s
        layer: Dispatcher = _Guard(_Core(by_name, self._snapshot), self._snapshot)
        # Applied innermost first so that the first declared decorator ends outermost.
        for position in range(len(decorators), 0, -1):
            layer = _Guard(self._wrap(position, decorators[position - 1], layer), self._snapshot)
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

    def definition(self, name: str) -> ToolDefinition:
        """The definition of ``name``; :class:`UnknownTool` when the plan lacks it."""
        try:
            return self._snapshot[name]
        except KeyError:
            raise UnknownTool(name) from None

    async def dispatch(
        self,
        invocation: ToolInvocation,
        *,
        deadline_s: float | None = None,
        reporter: Reporter | None = None,
    ) -> DispatchOutcome:
        """Run ``invocation`` through every layer to its tool body.

        Always answers a :class:`DispatchOutcome` — untyped exceptions, rule
        violations and an expired deadline become a classified failure — except
        that ``asyncio.CancelledError`` propagates unchanged and a failing body
        whose progress reporting also failed raises :class:`DispatchFailure`.
        ``deadline_s`` (else the default) bounds the whole stack; see
        :func:`arvis.tools.classify.deadline_exceeded` for its classification.
        """
        deadline = deadline_s if deadline_s is not None else self._default_deadline_s
        state = _CallState()
        token = _CALL.set(state)
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                return await self._outer.dispatch(
                    invocation, deadline_s=deadline, reporter=reporter
                )
        except TimeoutError:
            if not scope.expired():
                raise
            definition = self._snapshot.get(invocation.tool)
            return DispatchOutcome(
                failure=deadline_exceeded(definition, body_started=state.body_started)
            )
        finally:
            _CALL.reset(token)


def _fixed_destination(tool: Tool) -> str | None:
    destination = getattr(tool, "destination", None)
    if destination is not None and not (isinstance(destination, str) and destination):
        raise DefinitionError(tool.name, "destination must be a URL string or None")
    return destination

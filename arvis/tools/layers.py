"""Dispatch layers and decorators (DESIGN §3).

A decorator (policy, telemetry, retry, a plugin) is a callable that takes the
layer beneath it and returns a new layer with the same definitions. The
:class:`~arvis.tools.dispatcher.ToolDispatcher` applies them in declared
order, first = outermost, and guards every layer with one definition snapshot.

A layer hands down the frozen invocation it received: one that differs (tool,
payload, idempotency key, context or call id) is refused before the body. The
body runs at most once per dispatch however often a layer calls ``inner``, and
once it ran, a layer can make the answer more cautious but never less; a retry
is a new syscall attempt (see :mod:`arvis.tools.dispatcher`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypedDict, Unpack, runtime_checkable

from arvis.domain.definitions import ToolDefinition
from arvis.tools.base import Reporter, ToolInvocation
from arvis.tools.outcome import DispatchOutcome


class DispatchOptions(TypedDict, total=False):
    """What a dispatch carries beside the invocation, declared once for every layer.

    Each layer takes them as ``**options: Unpack[DispatchOptions]`` and hands them
    down as ``**options``, so an option added here reaches the body through every
    layer without another signature to edit.
    """

    deadline_s: float | None
    """Seconds the whole stack may take; None (or absent): the dispatcher's default."""
    reporter: Reporter | None
    """Receives the tool's progress and its start report."""


@runtime_checkable
class Dispatcher(Protocol):
    """Something that runs a frozen invocation and answers a :class:`DispatchOutcome`."""

    @property
    def definitions(self) -> Mapping[str, ToolDefinition]: ...

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome: ...


DispatchDecorator = Callable[[Dispatcher], Dispatcher]
"""Wraps the layer beneath it; must return a layer with unchanged definitions."""


class DispatchLayer:
    """A convenient base for decorators: delegates everything to ``inner``.

    Override :meth:`dispatch` and call ``await self.inner.dispatch(invocation, **options)``.
    """

    def __init__(self, inner: Dispatcher) -> None:
        self.inner = inner

    @property
    def definitions(self) -> Mapping[str, ToolDefinition]:
        return self.inner.definitions

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome:
        return await self.inner.dispatch(invocation, **options)

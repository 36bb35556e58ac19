"""One agent turn: one model call, then each finalized decision submitted in order.

This is the thin composition behind ``arvis turn``. It owns no loop beyond the
single model call: the model is not called again with the outcomes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from arvis.domain.decisions import ActionDecision
from arvis.providers.base import ModelProvider, ModelRequest, ModelTurn, Progress, TextDelta
from arvis.providers.errors import ProviderStreamTruncated

T = TypeVar("T")

Submit = Callable[[str, ActionDecision], Awaitable[T]]
"""``(causal_id, decision) -> outcome``; e.g. a ``tool.execute`` syscall."""


async def run_turn(
    provider: ModelProvider,
    request: ModelRequest,
    submit: Submit[T],
    *,
    on_event: Callable[[TextDelta | Progress | ModelTurn], None] | None = None,
) -> list[T]:
    """Call the model once; submit each finalized decision with its call id as causal id.

    Nothing is submitted unless the whole response was completed and validated:
    a ``ProviderError`` from the stream means no decision of it was submitted.
    Decisions are submitted one at a time in output order; an exception from
    ``submit`` stops the turn and propagates (later decisions are not submitted).
    ``on_event`` sees every stream event, for display.
    """
    stream = await provider.stream(request)
    turn: ModelTurn | None = None
    try:
        async for event in stream:
            if on_event is not None:
                on_event(event)
            if isinstance(event, ModelTurn):
                turn = event
    finally:
        await stream.aclose()
    if turn is None:
        raise ProviderStreamTruncated("the stream ended without a turn")
    outcomes: list[T] = []
    for finalized in turn.decisions:
        outcomes.append(await submit(finalized.call_id, finalized.decision))
    return outcomes

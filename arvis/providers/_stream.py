"""Stream mechanics shared by every provider: one pump, one bounded queue.

The pump task is the only code that touches the vendor stream. It translates
vendor events into ARVIS events (raising ``ProviderError`` on any rule) and feeds
a bounded queue, so a slow receiver applies back-pressure instead of buffering
an unbounded response. Receivers wait on the queue under their own deadline
(``asyncio.timeout``), which creates no task, so a timed-out or cancelled
receive leaves nothing behind and loses no event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Final

from arvis.providers.base import ModelTurn, Progress, TextDelta
from arvis.providers.errors import (
    ProviderConcurrentReceive,
    ProviderStreamClosed,
    ProviderTimeout,
)

Event = TextDelta | Progress | ModelTurn

_END: Final = object()
_CLOSED: Final = object()


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class PumpedStream:
    """A :class:`~arvis.providers.base.ModelStream` fed by one pump task.

    ``source`` yields already validated ARVIS events. ``close`` releases the
    vendor stream; the pump awaits it however it ends, even when the source was
    never started (an unstarted async generator would skip its own ``finally``).
    Construct inside a running loop.
    """

    def __init__(
        self,
        source: AsyncIterator[Event],
        *,
        close: Callable[[], Awaitable[None]] | None = None,
        initial: Iterable[Event] = (),
        queue_size: int = 64,
        receive_timeout_s: float | None = None,
    ) -> None:
        self._source = source
        self._close_source = close
        self._receive_timeout_s = receive_timeout_s
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize=max(1, queue_size))
        self._initial = list(initial)
        self._receiving = False
        self._closed = False
        self._finished = False
        self._failure: BaseException | None = None
        self._pump = asyncio.get_running_loop().create_task(self._run(), name="arvis-model-pump")

    async def _run(self) -> None:
        try:
            for event in self._initial:
                await self._queue.put(event)
            self._initial.clear()
            async for event in self._source:
                await self._queue.put(event)
            await self._queue.put(_END)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the pump is a task boundary; hand it over
            # Anything escaping a task would be lost; the receiver re-raises it.
            await self._queue.put(_Failure(exc))
        finally:
            # Close the vendor stream even when cancelled: the connection must go back.
            # The stream is already terminal here, so a failing close has nobody to tell.
            aclose = getattr(self._source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
            if self._close_source is not None:
                with contextlib.suppress(Exception):
                    await self._close_source()

    def __aiter__(self) -> PumpedStream:
        return self

    async def __anext__(self) -> Event:
        return await self.receive(timeout_s=self._receive_timeout_s)

    async def receive(self, *, timeout_s: float | None = None) -> Event:
        """The next event; ``StopAsyncIteration`` after the turn (see ``ModelStream``)."""
        if self._receiving:
            raise ProviderConcurrentReceive("another receive is already waiting on this stream")
        if self._closed:
            raise ProviderStreamClosed("the stream was closed")
        if self._failure is not None:
            raise self._failure
        if self._finished:
            raise StopAsyncIteration
        self._receiving = True
        try:
            try:
                async with asyncio.timeout(timeout_s):
                    item = await self._queue.get()
            except TimeoutError:
                raise ProviderTimeout(f"no model event within {timeout_s} s") from None
        finally:
            self._receiving = False
        if item is _CLOSED or self._closed:
            raise ProviderStreamClosed("the stream was closed")
        if item is _END:
            self._finished = True
            raise StopAsyncIteration
        if isinstance(item, _Failure):
            self._failure = item.error
            raise item.error
        assert isinstance(item, TextDelta | Progress | ModelTurn)
        if isinstance(item, ModelTurn):
            # The turn is last by contract; whatever the pump still has is the end marker.
            self._finished = True
        return item

    async def aclose(self) -> None:
        """Cancel the pump, wait for it (it closes the vendor stream), wake a receiver."""
        if not self._closed:
            self._closed = True
            self._pump.cancel()
        # asyncio.wait neither raises the pump's outcome nor swallows our own cancellation.
        await asyncio.wait({self._pump})
        # A receiver waiting now has an empty queue; drop leftovers and wake it.
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_CLOSED)

    @property
    def pump_done(self) -> bool:
        """Whether the pump task has finished (for tests and diagnostics)."""
        return self._pump.done()

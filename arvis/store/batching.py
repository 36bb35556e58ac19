"""Group commit (issue 25): the steps of one kind that queue while a statement of
that kind is in flight go to the database together, as one statement and one commit.

There is no timer. A step that finds no statement of its tenant in flight is sent at
once, as a batch of one, by the caller itself; steps that arrive while it is in
flight queue, and when it returns they go as the next batch. Under load a batch is
whatever queued during the previous commit; alone, a call waits for nothing.

A batch is the one write path carrying N items, not a second path: each item gets
its own answer row (a status, never an exception), in order, and a caller resumes
only once the statement that carried its item returned, so nothing runs on an
admission that is not committed. A statement that fails as a whole (the database is
unreachable, a serialization failure) fails every item it carried, each of which is
then retried as its caller retries any step.

Batches are per tenant (a lane), so a batch could be pushed down to the tenant's
shard, and at most one batch of a lane is in flight in this process. An item that
takes locks beyond its run's (``charged``: budget rows) goes in a batch with no
other such item (the batch statements take their run locks first, in one order, so
batches never wait on each other in a cycle); the batch then ends before the next
charged item, so items keep their order.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

_Item = TypeVar("_Item")

LIMIT = 64
"""Items per batch at most: the statement's run locks, and its answer, stay small."""


@dataclass(slots=True)
class _Waiting(Generic[_Item]):
    item: _Item
    charged: bool
    answer: asyncio.Future[tuple[Any, ...]]


@dataclass(slots=True)
class _Lane(Generic[_Item]):
    queue: deque[_Waiting[_Item]] = field(default_factory=deque)


Send = Callable[[str, Sequence[_Item]], Awaitable[Sequence[tuple[Any, ...]]]]


class GroupCommit(Generic[_Item]):
    """Sends the items of a lane through ``send`` (one statement for the lane and a list
    of its items, answering one row per item, in order), batching those that queue
    meanwhile."""

    def __init__(self, send: Send[_Item], *, limit: int = LIMIT) -> None:
        self._send = send
        self._limit = limit
        self._lanes: dict[str, _Lane[_Item]] = {}
        self._flushing: set[asyncio.Task[None]] = set()
        self.sizes: Counter[int] = Counter()
        """How many batches of each size were sent (the bench's and the tests' view)."""

    def waiting(self, lane: str) -> int:
        """Items of ``lane`` queued behind the batch in flight."""
        found = self._lanes.get(lane)
        return 0 if found is None else len(found.queue)

    async def submit(self, lane: str, item: _Item, *, charged: bool = False) -> tuple[Any, ...]:
        """``item``'s answer row, once the statement that carried it returned."""
        found = self._lanes.get(lane)
        if found is not None:
            answer: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
            found.queue.append(_Waiting(item, charged, answer))
            return await answer
        # Nothing of this lane in flight: this caller sends its item at once, alone.
        self._lanes[lane] = _Lane()
        try:
            (row,) = await self._sent(lane, [item])
        finally:
            self._next(lane)
        return row

    async def _sent(self, lane: str, items: Sequence[_Item]) -> Sequence[tuple[Any, ...]]:
        self.sizes[len(items)] += 1
        rows = await self._send(lane, items)
        if len(rows) != len(items):
            raise RuntimeError(f"a batch of {len(items)} was answered with {len(rows)} rows")
        return rows

    def _next(self, lane: str) -> None:
        """The lane's statement returned: send what queued meanwhile, or free the lane."""
        queue = self._lanes[lane].queue
        batch: list[_Waiting[_Item]] = []
        charged = False
        while queue and len(batch) < self._limit:
            waiting = queue[0]
            if waiting.answer.done():  # its caller gave up before it was sent
                queue.popleft()
                continue
            if waiting.charged and charged:
                break
            charged = charged or waiting.charged
            batch.append(queue.popleft())
        if not batch:
            del self._lanes[lane]
            return
        task = asyncio.get_running_loop().create_task(self._flush(lane, batch))
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _flush(self, lane: str, batch: list[_Waiting[_Item]]) -> None:
        try:
            rows = await self._sent(lane, [waiting.item for waiting in batch])
        except asyncio.CancelledError:
            for waiting in batch:
                waiting.answer.cancel()
            raise
        except Exception as exc:
            for waiting in batch:
                if not waiting.answer.done():
                    waiting.answer.set_exception(exc)
        else:
            for waiting, row in zip(batch, rows, strict=True):
                if not waiting.answer.done():
                    waiting.answer.set_result(row)
        finally:
            self._next(lane)

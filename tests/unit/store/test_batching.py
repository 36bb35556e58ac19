"""GroupCommit's rules, on a fake statement: no timer, a batch is what queued while the
previous one was in flight, one charged item per batch, order kept, failures per batch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from arvis.store.batching import GroupCommit


class Statement:
    """A fake batch statement that answers each item with itself, and can be held."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[str]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    async def __call__(self, lane: str, items: Sequence[str]) -> list[tuple[Any, ...]]:
        self.sent.append((lane, list(items)))
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return [(item,) for item in items]


async def held_then(
    commit: GroupCommit[str], statement: Statement, queued: list[tuple[str, bool]]
) -> list[Any]:
    """Send ``a`` alone and hold it while ``queued`` (item, charged) queue; then let go."""
    statement.gate.clear()
    first = asyncio.ensure_future(commit.submit("t", "a"))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(commit.submit("t", i, charged=c)) for i, c in queued]
    await asyncio.sleep(0)
    assert commit.waiting("t") == len(queued)
    statement.gate.set()
    return await asyncio.gather(first, *rest, return_exceptions=True)


async def test_a_lone_item_is_sent_at_once_by_its_caller() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    assert await commit.submit("t", "a") == ("a",)
    assert statement.sent == [("t", ["a"])]
    assert commit.waiting("t") == 0


async def test_items_queued_behind_a_statement_go_next_as_one_batch_in_order() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    answers = await held_then(commit, statement, [("b", False), ("c", False), ("d", False)])
    assert answers == [("a",), ("b",), ("c",), ("d",)]
    assert statement.sent == [("t", ["a"]), ("t", ["b", "c", "d"])]
    assert commit.sizes == {1: 1, 3: 1}


async def test_lanes_are_batched_apart() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    statement.gate.clear()
    first = asyncio.ensure_future(commit.submit("t", "a"))
    other = asyncio.ensure_future(commit.submit("u", "x"))
    await asyncio.sleep(0)
    assert commit.waiting("u") == 0  # another tenant's item is not queued behind "t"
    statement.gate.set()
    assert await asyncio.gather(first, other) == [("a",), ("x",)]
    assert sorted(statement.sent) == [("t", ["a"]), ("u", ["x"])]


async def test_a_batch_holds_one_charged_item_and_ends_before_the_next() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    await held_then(commit, statement, [("b", True), ("c", False), ("d", True), ("e", False)])
    assert statement.sent == [("t", ["a"]), ("t", ["b", "c"]), ("t", ["d", "e"])]


async def test_a_batch_is_at_most_the_limit() -> None:
    statement = Statement()
    commit = GroupCommit(statement, limit=2)
    await held_then(commit, statement, [("b", False), ("c", False), ("d", False)])
    assert statement.sent == [("t", ["a"]), ("t", ["b", "c"]), ("t", ["d"])]


async def test_a_failed_statement_fails_the_items_it_carried_and_the_lane_goes_on() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    statement.fail = ConnectionError("gone")
    answers = await held_then(commit, statement, [("b", False), ("c", False)])
    assert [type(answer) for answer in answers] == [ConnectionError] * 3
    statement.fail = None
    assert await commit.submit("t", "z") == ("z",)


async def test_an_item_whose_caller_gave_up_before_it_was_sent_is_not_sent() -> None:
    statement = Statement()
    commit = GroupCommit(statement)
    statement.gate.clear()
    first = asyncio.ensure_future(commit.submit("t", "a"))
    await asyncio.sleep(0)
    gone = asyncio.ensure_future(commit.submit("t", "b"))
    kept = asyncio.ensure_future(commit.submit("t", "c"))
    await asyncio.sleep(0)
    gone.cancel()
    statement.gate.set()
    assert await asyncio.gather(first, kept) == [("a",), ("c",)]
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert statement.sent == [("t", ["a"]), ("t", ["c"])]

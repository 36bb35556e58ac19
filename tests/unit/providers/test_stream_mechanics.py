"""One pump, a bounded queue, receives with their own deadlines, and a racing close."""

from __future__ import annotations

import asyncio

import pytest

from arvis.providers import errors as e
from arvis.providers.base import ModelStream, ModelTurn, Progress, TextDelta
from arvis.providers.openai import OpenAIProvider
from tests.unit.providers.sse import (
    HAPPY_TEXT,
    GatedBody,
    Server,
    client_for,
    completed,
    created,
    encode,
    make_request,
    message_events,
    message_item,
    provider_for,
    sse_response,
)


def gated() -> GatedBody:
    head = encode([created()])
    # Sequence numbers restart in the tail; ARVIS does not rely on them.
    tail = encode([*message_events(0, HAPPY_TEXT), completed([message_item(0, HAPPY_TEXT)])])
    return GatedBody(head, tail)


async def open_gated() -> tuple[ModelStream, GatedBody]:
    body = gated()
    stream = await provider_for(Server(lambda: sse_response(body))).stream(make_request())
    first = await stream.receive(timeout_s=1)
    assert isinstance(first, Progress)
    assert first.stage == "started"
    return stream, body


async def waiting(task: asyncio.Task[object]) -> None:
    """Let ``task`` reach its await on the queue."""
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()


async def test_the_first_event_is_fetched_before_the_stream_is_returned() -> None:
    server = Server(lambda: sse_response(gated()))
    stream = await provider_for(server).stream(make_request())
    assert len(server.requests) == 1
    event = await stream.receive(timeout_s=0.01)  # already buffered: no network wait
    assert isinstance(event, Progress)
    await stream.aclose()


async def test_close_racing_a_receive_wakes_it_cancels_the_pump_and_closes_the_body() -> None:
    stream, body = await open_gated()
    receiver = asyncio.create_task(stream.receive(timeout_s=5))
    await waiting(receiver)

    await stream.aclose()

    with pytest.raises(e.ProviderStreamClosed):
        await receiver
    assert stream.pump_done  # type: ignore[attr-defined]
    assert body.closed
    with pytest.raises(e.ProviderStreamClosed):
        await stream.receive(timeout_s=1)
    await stream.aclose()  # idempotent


async def test_close_from_another_task_while_iterating() -> None:
    stream, body = await open_gated()

    async def iterate() -> list[object]:
        return [event async for event in stream]

    receiver = asyncio.create_task(iterate())
    await waiting(receiver)
    await asyncio.create_task(stream.aclose())
    with pytest.raises(e.ProviderStreamClosed):
        await receiver
    assert body.closed


async def test_a_concurrent_receive_is_refused() -> None:
    stream, _ = await open_gated()
    receiver = asyncio.create_task(stream.receive(timeout_s=5))
    await waiting(receiver)
    with pytest.raises(e.ProviderConcurrentReceive):
        await stream.receive(timeout_s=1)
    await stream.aclose()
    with pytest.raises(e.ProviderStreamClosed):
        await receiver


async def test_a_receive_timeout_leaks_no_task_and_leaves_the_stream_usable() -> None:
    stream, body = await open_gated()
    before = asyncio.all_tasks()

    for _ in range(3):
        with pytest.raises(e.ProviderTimeout) as caught:
            await stream.receive(timeout_s=0.02)
        assert caught.value.retryable
    assert asyncio.all_tasks() == before

    body.gate.set()
    events = [event async for event in stream]
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == HAPPY_TEXT
    assert isinstance(events[-1], ModelTurn)
    await stream.aclose()
    assert asyncio.all_tasks() == before - {t for t in before if t.done()}


async def test_a_cancelled_receive_loses_no_event() -> None:
    stream, body = await open_gated()
    receiver = asyncio.create_task(stream.receive(timeout_s=5))
    await waiting(receiver)
    receiver.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiver

    body.gate.set()
    events = [event async for event in stream]
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == HAPPY_TEXT
    await stream.aclose()


async def test_closing_leaves_no_pump_task_behind() -> None:
    before = asyncio.all_tasks()
    stream, body = await open_gated()
    assert len(asyncio.all_tasks() - before) == 1  # the pump, and only it
    await stream.aclose()
    assert asyncio.all_tasks() == before
    assert body.closed


async def test_the_stream_ends_after_the_turn() -> None:
    stream, body = await open_gated()
    body.gate.set()
    events = [event async for event in stream]
    assert isinstance(events[-1], ModelTurn)
    with pytest.raises(StopAsyncIteration):
        await stream.receive(timeout_s=1)
    await stream.aclose()


async def test_a_slow_receiver_applies_back_pressure_to_the_pump() -> None:
    many = [created(), *message_events(0, "x" * 400, chunks=200)]
    body = GatedBody(encode(many))
    server = Server(lambda: sse_response(body))
    stream = await OpenAIProvider(client_for(server), queue_size=4).stream(make_request())
    for _ in range(10):
        await asyncio.sleep(0)
    # The pump is parked on a full queue instead of buffering the whole response.
    assert stream._queue.qsize() == 4  # type: ignore[attr-defined]
    await stream.aclose()
    assert body.closed

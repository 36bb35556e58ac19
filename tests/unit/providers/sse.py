"""Hand-written Responses API streams, served to the real SDK through httpx.MockTransport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from arvis.domain.definitions import ToolDefinition
from arvis.providers import errors as e
from arvis.providers.base import ModelRequest, ModelTurn, ProviderLimits
from arvis.providers.openai import OpenAIProvider

FIXTURES = Path(__file__).parent / "fixtures"
Event = dict[str, Any]

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "body": {"type": "string", "maxLength": 1000}},
    "required": ["to"],
}


def lookup_tool() -> ToolDefinition:
    return ToolDefinition(
        name="weather.lookup",
        description="Current weather for a city.",
        input_schema=LOOKUP_SCHEMA,
        effect="read_only",
        replay_safety="safe",
    )


def email_tool(**policy: Any) -> ToolDefinition:
    fields = {"effect": "mutating", "replay_safety": "unsafe", "capabilities": ["network.access"]}
    fields.update(policy)
    return ToolDefinition(
        name="email.send",
        description="Send an email.",
        input_schema=EMAIL_SCHEMA,
        **fields,
    )


def make_request(tools: Iterable[ToolDefinition] | None = None, **limits: Any) -> ModelRequest:
    return ModelRequest(
        model="gpt-test",
        instructions="Be brief.",
        input="What is the weather in Oslo? Then mail it to ana@example.com.",
        tools=tuple(tools) if tools is not None else (lookup_tool(), email_tool()),
        limits=ProviderLimits(**limits),
    )


# Event builders: realistic shapes of the Responses streaming API.


def created(response_id: str = "resp_1") -> Event:
    return {
        "type": "response.created",
        "response": {
            "id": response_id,
            "object": "response",
            "status": "in_progress",
            "output": [],
        },
    }


def message_events(
    index: int, text: str, *, chunks: int = 3, item_id: str | None = None
) -> list[Event]:
    item_id = item_id or f"msg_{index}"
    size = max(1, -(-len(text) // chunks))
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {
                "id": item_id,
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            },
        },
        {
            "type": "response.content_part.added",
            **where,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
        *({"type": "response.output_text.delta", **where, "delta": piece} for piece in pieces),
        {"type": "response.output_text.done", **where, "text": text},
        {
            "type": "response.content_part.done",
            **where,
            "part": {"type": "output_text", "text": text, "annotations": []},
        },
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": message_item(index, text, item_id),
        },
    ]


def message_item(index: int, text: str, item_id: str | None = None) -> Event:
    return {
        "id": item_id or f"msg_{index}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call_item(index: int, name: str, call_id: str, arguments: str) -> Event:
    return {
        "id": f"fc_{index}",
        "type": "function_call",
        "status": "completed",
        "name": name,
        "call_id": call_id,
        "arguments": arguments,
    }


def call_events(
    index: int, name: str, call_id: str, arguments: str, *, chunks: int = 3
) -> list[Event]:
    item_id = f"fc_{index}"
    size = max(1, -(-len(arguments) // chunks))
    pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    added = {**call_item(index, name, call_id, ""), "status": "in_progress"}
    where = {"item_id": item_id, "output_index": index}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *({"type": "response.function_call_arguments.delta", **where, "delta": p} for p in pieces),
        {"type": "response.function_call_arguments.done", **where, "arguments": arguments},
        {
            "type": "response.output_item.done",
            "output_index": index,
            "item": call_item(index, name, call_id, arguments),
        },
    ]


def reasoning_events(index: int) -> list[Event]:
    item = {"id": f"rs_{index}", "type": "reasoning", "summary": []}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": f"rs_{index}",
            "output_index": index,
            "summary_index": 0,
            "delta": "secret chain of thought",
        },
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def completed(output: list[Event], response_id: str = "resp_1") -> Event:
    return {
        "type": "response.completed",
        "response": {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "output": output,
        },
    }


ARGS_LOOKUP = '{"city": "Oslo"}'
ARGS_EMAIL = '{"to": "ana@example.com", "body": "Sunny"}'
HAPPY_TEXT = "Checking the weather, then mailing Ana."


def happy_events() -> list[Event]:
    """Reasoning, text and two function calls, completed."""
    return [
        created(),
        {"type": "response.in_progress", "response": {"id": "resp_1", "status": "in_progress"}},
        *reasoning_events(0),
        *message_events(1, HAPPY_TEXT),
        *call_events(2, "weather.lookup", "call_a", ARGS_LOOKUP),
        *call_events(3, "email.send", "call_b", ARGS_EMAIL),
        completed(
            [
                {"id": "rs_0", "type": "reasoning", "summary": []},
                message_item(1, HAPPY_TEXT),
                call_item(2, "weather.lookup", "call_a", ARGS_LOOKUP),
                call_item(3, "email.send", "call_b", ARGS_EMAIL),
            ]
        ),
    ]


def encode(events: Iterable[Event]) -> bytes:
    """Server-sent events as the API writes them, with sequence numbers."""
    chunks = []
    for number, event in enumerate(events):
        body = {**event, "sequence_number": number}
        chunks.append(f"event: {event['type']}\ndata: {json.dumps(body)}\n\n")
    return "".join(chunks).encode()


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


class Server:
    """A MockTransport handler that records requests and serves scripted answers."""

    def __init__(self, *answers: bytes | httpx.Response | Callable[[], httpx.Response]) -> None:
        self._answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self._answers.pop(0) if len(self._answers) > 1 else self._answers[0]
        if isinstance(answer, bytes):
            return sse_response(answer)
        if isinstance(answer, httpx.Response):
            return answer
        return answer()

    @property
    def bodies(self) -> list[bytes]:
        return [request.content for request in self.requests]


def sse_response(body: bytes | httpx.AsyncByteStream) -> httpx.Response:
    headers = {"content-type": "text/event-stream"}
    if isinstance(body, bytes):
        return httpx.Response(200, headers=headers, content=body)
    return httpx.Response(200, headers=headers, stream=body)


class GatedBody(httpx.AsyncByteStream):
    """A stream body that sends ``head``, waits for ``gate``, then sends ``tail``."""

    def __init__(self, head: bytes, tail: bytes = b"") -> None:
        self.head = head
        self.tail = tail
        self.gate = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        await self.gate.wait()
        if self.tail:
            yield self.tail

    async def aclose(self) -> None:
        self.closed = True


def client_for(
    server: Server | Callable[[httpx.Request], httpx.Response], *, max_retries: int = 0
) -> AsyncOpenAI:
    return AsyncOpenAI(
        api_key="test",
        base_url="http://testserver/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
        max_retries=max_retries,
    )


def provider_for(
    server: Server | Callable[[httpx.Request], httpx.Response], *, max_retries: int = 0
) -> OpenAIProvider:
    return OpenAIProvider(client_for(server, max_retries=max_retries))


async def fails_with(
    events: list[Event] | bytes, error: type[e.ProviderError], request: ModelRequest | None = None
) -> e.ProviderError:
    """Run the stream to its end; it must raise ``error`` without yielding a turn."""
    body = events if isinstance(events, bytes) else encode(events)
    stream = await provider_for(Server(body)).stream(request or make_request())
    seen = []
    with pytest.raises(error) as caught:
        async for event in stream:
            seen.append(event)
    await stream.aclose()
    assert not any(isinstance(event, ModelTurn) for event in seen)
    assert caught.type is error
    return caught.value


def one_call(
    name: str = "weather.lookup", arguments: str = ARGS_LOOKUP, call_id: str = "call_a"
) -> list[Event]:
    return [
        created(),
        *call_events(0, name, call_id, arguments),
        completed([call_item(0, name, call_id, arguments)]),
    ]

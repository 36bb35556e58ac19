"""What the upstream session's HTTP client proves about a ``tools/call`` (DESIGN §10
"Not-started needs proof"): against a loopback listener that counts what reaches it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from arvis.tools.mcp.keys import CALL_ID
from arvis.tools.mcp.sending import Abandoned, SendProof, WatchedClient


def _call(call_id: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {}, "_meta": {CALL_ID: call_id}},
    }


@pytest.fixture
async def listener() -> AsyncIterator[tuple[str, list[bytes]]]:
    received: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read(65536))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp", received
    finally:
        server.close()


_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


async def test_a_call_given_up_before_its_post_began_is_never_sent_later(
    listener: tuple[str, list[bytes]],
) -> None:
    url, received = listener
    proof = SendProof()
    async with WatchedClient(proof) as http:
        await http.post(url, json=_LIST)  # the session's first request shows the trace works
        assert proof.abandon_if_unsent("call-1")
        with pytest.raises(Abandoned):
            await http.post(url, json=_call("call-1"))
    assert len(received) == 1


async def test_before_any_request_completed_only_a_refusal_is_proof() -> None:
    assert not SendProof().abandon_if_unsent("call-0")


async def test_a_client_whose_trace_events_never_fire_proves_nothing_by_them() -> None:
    proof = SendProof()
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json={}))
    async with WatchedClient(proof, transport=transport) as http:
        await http.post("http://upstream.test/mcp", json=_LIST)
    assert not proof.abandon_if_unsent("call-4")


async def test_a_call_whose_post_began_may_have_arrived(listener: tuple[str, list[bytes]]) -> None:
    url, received = listener
    proof = SendProof()
    async with WatchedClient(proof) as http:
        await http.post(url, json=_call("call-2"))
    assert len(received) == 1
    assert not proof.abandon_if_unsent("call-2")


async def test_a_refused_connection_is_proof_nothing_was_sent() -> None:
    proof = SendProof()
    async with WatchedClient(proof) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.post("http://127.0.0.1:9/mcp", json=_call("call-3"))
    assert proof.abandon_if_unsent("call-3")


async def test_requests_that_are_not_tool_calls_are_not_watched(
    listener: tuple[str, list[bytes]],
) -> None:
    url, received = listener
    proof = SendProof()
    async with WatchedClient(proof) as http:
        await http.post(url, json=_LIST)
    assert len(received) == 1

"""The per-turn instance's listener: connections it accepts send without Nagle's delay.

With a protocol-0 socket (``socket.create_server``) asyncio left Nagle's algorithm on for
accepted connections, and each request on a keep-alive connection to ``arvis serve-turn``
waited ~40 ms for the client's delayed ACK (every MCP call makes several).
"""

from __future__ import annotations

import asyncio
import socket

from arvis.serving.process import listen


async def test_connections_accepted_by_a_turns_listener_have_nagle_off() -> None:
    listener = listen("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=listener)
    try:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()

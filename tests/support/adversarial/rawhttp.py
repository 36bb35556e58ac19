"""An HTTP/1.1 server on asyncio streams that answers each request however its handler
writes it: a well-formed response, a malformed one, nothing at all, or a reset.

One request per connection (every answer says ``Connection: close``), which is all a
stub needs and keeps a hung or reset request from taking other requests with it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Lowercased names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


class RawHttpServer:
    """``await start()``, then it answers on 127.0.0.1:``port`` until ``close()``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def pause(self) -> None:
        """Stop listening (connections already made carry on); :meth:`resume` listens again."""
        assert self._server is not None
        self._server.close()

    async def resume(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            request = await read_request(reader)
            if request is not None:
                await self._handler(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away (it timed out): what some cells are about
        except asyncio.CancelledError:
            pass  # closing, with a hung answer still pending: nothing is waiting for it
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method, path, headers, body)


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> None:
    """One complete response, then the connection closes."""
    fields = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in fields.items())
    writer.write(head.encode("latin-1") + b"\r\n" + body)
    await writer.drain()


def reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection with a TCP reset: the request was read, no answer will come."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@contextmanager
def black_hole(port: int) -> Iterator[None]:
    """A listener on ``port`` whose accept queue is full, so a new connection hangs in its
    TCP handshake (the kernel drops its SYN) until the block ends: not one byte of a
    request can leave the client meanwhile. Whatever listened on ``port`` must be paused.
    """
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(0)
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            yield
        finally:
            for filler in fillers:
                filler.close()

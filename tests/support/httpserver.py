"""A real HTTP/1.1 endpoint for remote-tool tests: asyncio streams on 127.0.0.1.

It runs in the test's own event loop, records every request it reads, and
answers each one as scripted: a JSON response, or nothing at all (a hung
endpoint that accepted the request and never answers).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the server read it off the socket."""

    method: str
    path: str
    headers: dict[str, str]
    """Lowercased names."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Respond:
    status: int = 200
    body: Any = None


@dataclass(frozen=True)
class Hang:
    """Read the request, then never answer."""


Behaviour = Respond | Hang


class LocalHttpServer:
    """``async with LocalHttpServer() as server``: listening on an ephemeral port.

    :meth:`then` queues behaviours; with none queued it answers ``200
    {"value": {"ok": true}}``. :attr:`connections` counts accepted sockets, so a
    test can show that nothing reached the server at all.
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.connections = 0
        self._script: list[Behaviour] = []
        self._server: asyncio.Server | None = None
        self._closing = asyncio.Event()
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    def url(self, path: str = "/tool") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def then(self, behaviour: Behaviour) -> None:
        self._script.append(behaviour)

    async def __aenter__(self) -> LocalHttpServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._closing.set()
        self._server.close()
        await self._server.wait_closed()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        try:
            request = await self._read(reader)
            if request is None:
                return
            self.received.append(request)
            behaviour = (
                self._script.pop(0) if self._script else Respond(200, {"value": {"ok": True}})
            )
            if isinstance(behaviour, Hang):
                await self._closing.wait()
                return
            await self._respond(writer, behaviour)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: that is what some tests do
        finally:
            writer.close()
            self._handlers.discard(task)

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> Received | None:
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
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return Received(method, path, headers, body)

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, behaviour: Respond) -> None:
        payload = b"" if behaviour.body is None else json.dumps(behaviour.body).encode()
        reason = HTTPStatus(behaviour.status).phrase
        head = (
            f"HTTP/1.1 {behaviour.status} {reason}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        await writer.drain()


@contextmanager
def refusing_port() -> Iterator[int]:
    """A local port that is bound but not listening: connecting to it is refused.

    Held bound for the duration, so nothing else can start listening on it.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])

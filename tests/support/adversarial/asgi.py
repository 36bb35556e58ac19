"""Hand one request read by :mod:`.rawhttp` to an ASGI app and write its answer back:
how the MCP stub lets the SDK's own server answer everything it does not sabotage."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Message

from tests.support.adversarial.rawhttp import Request, respond

# The stub frames the answer itself (one response, then close).
_FRAMING = {b"content-length", b"connection", b"transfer-encoding"}


async def forward(app: ASGIApp, request: Request, writer: asyncio.StreamWriter, port: int) -> None:
    path, _, query = request.path.partition("?")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
        "server": ("127.0.0.1", port),
        "client": ("127.0.0.1", 0),
        "state": {},
    }
    delivered, finished = False, asyncio.Event()
    status, headers, chunks = 500, {}, []

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for name, value in message.get("headers", []):
                if name.lower() not in _FRAMING:
                    headers[name.decode("latin-1")] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    await app(scope, receive, send)
    finished.set()
    await respond(writer, status, b"".join(chunks), headers)

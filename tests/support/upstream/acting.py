"""A streamable HTTP MCP upstream that acts, then answers badly (issue 23).

Every ``tools/call`` it reads first performs the tool's effect (it appends the
tool's name to :attr:`ActingUpstream.effects`), then answers the way the tool's
name says:

=================  ==================================================================
tool               answer after acting
=================  ==================================================================
``ok``             a normal result
``accepted``       ``202 Accepted`` with no body
``html``           ``200`` with ``Content-Type: text/html``
``redirect``       ``302 Found`` to another origin
``not_found``      ``404 Not Found``
``bad_json``       ``200`` ``application/json`` that is not JSON
``rpc_error``      a JSON-RPC error, code ``-32602`` (invalid params)
``server_error``   ``500 Internal Server Error``
=================  ==================================================================

Everything else (``server/discover``, ``initialize``, ``tools/list``) is
answered properly, without a session id: the server is stateless. Every request
it reads is in :attr:`ActingUpstream.requests`, so a test can also show that
nothing reached it at all. A plain ASGI app: run it with ``tests.support.server.running``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from starlette.types import Receive, Scope, Send

ANSWERS = ("ok", "accepted", "html", "redirect", "not_found", "bad_json", "rpc_error")
"""Every way the stub answers a call, besides ``server_error``."""


class ActingUpstream:
    """The ASGI app; thread-safe counters because uvicorn runs it on a thread of its own."""

    def __init__(self) -> None:
        self.effects: list[str] = []
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self.pattern: str | None = None
        """When set, every tool's ``text`` argument must match it (its input schema says)."""

    def effect_count(self, tool: str) -> int:
        with self._lock:
            return self.effects.count(tool)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] != "POST":
            with self._lock:
                self.requests.append(scope["method"])
            await _send(send, 405, b"", "text/plain")
            return
        request = json.loads(body)
        method = request.get("method", "")
        with self._lock:
            self.requests.append(method)
        if "id" not in request:
            await _send(send, 202, b"", "text/plain")  # a notification
            return
        await self._answer(request, send)

    async def _answer(self, request: dict[str, Any], send: Send) -> None:
        method, ident = request["method"], request["id"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "acting", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {"tools": [self._tool(name) for name in (*ANSWERS, "server_error")]}
        elif method == "tools/call":
            tool = request["params"]["name"]
            with self._lock:
                self.effects.append(tool)
            await self._after_acting(tool, ident, send)
            return
        else:
            error = {"code": -32601, "message": f"method {method!r} not found"}
            await _send(send, 200, _rpc(ident, error=error))
            return
        await _send(send, 200, _rpc(ident, result=result))

    def _tool(self, name: str) -> dict[str, Any]:
        text: dict[str, Any] = {"type": "string"}
        if self.pattern is not None:
            text["pattern"] = self.pattern
        return {
            "name": name,
            "description": f"Acts, then answers {name}.",
            "inputSchema": {"type": "object", "properties": {"text": text}},
        }

    @staticmethod
    async def _after_acting(tool: str, ident: Any, send: Send) -> None:
        if tool == "ok":
            result = {"content": [{"type": "text", "text": "done"}], "isError": False}
            await _send(send, 200, _rpc(ident, result=result))
        elif tool == "accepted":
            await _send(send, 202, b"", "text/plain")
        elif tool == "html":
            await _send(send, 200, b"<html>done</html>", "text/html")
        elif tool == "redirect":
            await _send(send, 302, b"", "text/plain", [(b"location", b"http://elsewhere.test/")])
        elif tool == "not_found":
            await _send(send, 404, b"not here", "text/plain")
        elif tool == "bad_json":
            await _send(send, 200, b'{"jsonrpc": "2.0", "id": ', "application/json")
        elif tool == "rpc_error":
            error = {"code": -32602, "message": "invalid params (after acting)"}
            await _send(send, 200, _rpc(ident, error=error))
        else:
            await _send(send, 500, b"boom", "text/plain")


def _rpc(ident: Any, *, result: Any = None, error: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    return json.dumps(message).encode()


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: str = "application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type.encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


ENDPOINT_ANSWERS = {
    "/accepted": 202,
    "/redirect": 302,
    "/bad_request": 400,
    "/not_found": 404,
    "/unprocessable": 422,
    "/too_many": 429,
    "/server_error": 500,
    "/html": 200,
    "/bad_json": 200,
}
"""The paths of :class:`ActingEndpoint` that act and then answer something other than a result."""


class ActingEndpoint:
    """An HTTP tool endpoint (``[[tools.http]]``) that acts, then answers as its path says.

    ``/ok`` answers a result; every path of :data:`ENDPOINT_ANSWERS` answers its
    status (``/accepted`` with no body, ``/html`` a 200 page, ``/bad_json`` a 200 body
    that is not JSON).
    Each POST performs the effect first: :meth:`effect_count` counts them by path.
    """

    def __init__(self) -> None:
        self.effects: list[str] = []
        self._lock = threading.Lock()

    def effect_count(self, path: str) -> int:
        with self._lock:
            return self.effects.count(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        with self._lock:
            self.effects.append(path)
        if path == "/ok":
            await _send(send, 200, b'{"value": {"done": true}}')
        elif path == "/accepted":
            await _send(send, 202, b"", "text/plain")
        elif path == "/html":
            await _send(send, 200, b"<html>done</html>", "text/html")
        elif path == "/bad_json":
            await _send(send, 200, b'{"value": ', "application/json")
        elif path == "/redirect":
            await _send(send, 302, b"", "text/plain", [(b"location", b"http://elsewhere.test/")])
        else:
            await _send(send, ENDPOINT_ANSWERS.get(path, 404), b'{"error": "after acting"}')

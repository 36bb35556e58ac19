"""A streamable HTTP MCP upstream that acts for people: the SDK's own server, stateful, behind
its own bearer authentication, recording every request it reads (issue 26).

- Tokens are verified against the test identity provider's keys (``tests/support/oidc``):
  signature, issuer, ``exp``, and ``aud`` = the audience it was built for. A valid token
  makes the request the token's person's (``scope["user"]``, the SDK's
  ``BearerAuthBackend``); anything else leaves it anonymous.
- Sessions are the SDK's: its session manager binds each session id to the person of the
  token that opened it and answers another person's request on it "404 Session not found"
  (the MCP security best practices). So a client that carried two people's tokens on one
  session would be refused. That is the 2025 protocol's ``initialize`` handshake, which
  the server speaks unless ``modern`` (it answers ``server/discover`` "method not found",
  so the client falls back to it); with ``modern`` it also speaks 2026-07-28, which has no
  session ids.
- ``initialize`` and ``tools/list`` are answered anonymously too (a service listing);
  ``tools/call`` needs a person: without one it is ``401``, and nothing acts.
- Tools: ``read`` (read-only hint) and ``write``; each call appends ``(tool, person)`` to
  :attr:`PeopleUpstream.effects`. A person named in ``hidden`` is listed no ``write``.

Every request is a :class:`Seen` in :attr:`PeopleUpstream.seen`: its method, JSON-RPC method,
session id, the ``Authorization`` it carried, whose token that was, and the session id the
answer opened. A plain ASGI app: run it with ``tests.support.server.running``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import Message, Receive, Scope, Send

from tests.support.oidc import SIGNING_ALGS

SESSION_HEADER = "mcp-session-id"


@dataclass(frozen=True)
class Seen:
    """One request the upstream read."""

    http_method: str
    rpc_method: str | None
    session: str | None
    """The ``Mcp-Session-Id`` it carried."""
    authorization: str | None
    person: str | None
    """The ``sub`` of a token that verified, else None."""
    status: int = 0
    opened: str | None = None
    """The session id the answer issued (an ``initialize``)."""

    @property
    def bearer(self) -> str | None:
        if self.authorization is None or not self.authorization.startswith("Bearer "):
            return None
        return self.authorization.removeprefix("Bearer ")


class _Verifier:
    """The SDK's ``TokenVerifier``: a JWT of the provider, for ``audience``, unexpired."""

    def __init__(self, issuer: str, jwks: Any, audience: str) -> None:
        self._issuer = issuer
        self._keys = KeySet.import_key_set(jwks)
        self._audience = audience

    def claims(self, token: str) -> dict[str, Any] | None:
        try:
            decoded = jwt.decode(token, self._keys, algorithms=list(SIGNING_ALGS))
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self._issuer},
                aud={"essential": True, "value": self._audience},
                sub={"essential": True},
                exp={"essential": True},
            ).validate(decoded.claims)
        except (JoseError, ValueError):
            return None
        return dict(decoded.claims)

    async def verify_token(self, token: str) -> AccessToken | None:
        claims = self.claims(token)
        if claims is None:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=self._audience,
            subject=str(claims["sub"]),
            claims=claims,
        )


class PeopleUpstream:
    """The ASGI app; its records are thread-safe (uvicorn runs it on a thread of its own)."""

    def __init__(
        self,
        issuer: str,
        jwks: dict[str, Any],
        audience: str,
        *,
        hidden: frozenset[str] = frozenset(),
        modern: bool = False,
    ) -> None:
        self.seen: list[Seen] = []
        self.effects: list[tuple[str, str | None]] = []
        self.hidden = hidden
        self.modern = modern
        self._lock = threading.Lock()
        self._verifier = _Verifier(issuer, jwks, audience)
        self._manager = StreamableHTTPSessionManager(
            app=self._server(), json_response=True, stateless=False
        )
        authenticated = AuthContextMiddleware(self._gate)
        self._app = AuthenticationMiddleware(
            authenticated, backend=BearerAuthBackend(self._verifier)
        )

    def calls(self) -> list[Seen]:
        """The ``tools/call`` requests it read."""
        with self._lock:
            return [seen for seen in self.seen if seen.rpc_method == "tools/call"]

    def effect_count(self) -> int:
        with self._lock:
            return len(self.effects)

    def _server(self) -> Server[Any]:
        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            tools = [
                types.Tool(
                    name="read",
                    description="Read the person's records.",
                    input_schema={"type": "object"},
                    annotations=types.ToolAnnotations(read_only_hint=True),
                ),
                types.Tool(
                    name="write",
                    description="Write to the person's records.",
                    input_schema={"type": "object"},
                ),
            ]
            if _person(ctx) in self.hidden:
                tools = tools[:1]
            return types.ListToolsResult(tools=tools)

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            person = _person(ctx)
            with self._lock:
                self.effects.append((params.name, person))
            return types.CallToolResult(
                content=[types.TextContent(text="done")],
                structured_content={"done": params.name, "for": person},
            )

        return Server("people", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
        authorization = headers.get("authorization")
        token = authorization.removeprefix("Bearer ") if authorization else None
        claims = None if token is None else self._verifier.claims(token)
        try:
            message = json.loads(body) if body else {}
            rpc_method = message.get("method")
        except (ValueError, AttributeError):
            message, rpc_method = {}, None
        answered: dict[str, Any] = {}
        unread: list[bytes] = [body]

        async def replay() -> Message:
            if unread:
                return {"type": "http.request", "body": unread.pop(), "more_body": False}
            return await receive()

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                for name, value in message.get("headers", []):
                    if name.decode().lower() == SESSION_HEADER:
                        answered["opened"] = value.decode()
            await send(message)

        scope = {**scope, "arvis_rpc_method": rpc_method}
        try:
            if rpc_method == "server/discover" and not self.modern:
                error = {"code": -32601, "message": "Method not found"}
                await _json(watch, 200, {"jsonrpc": "2.0", "id": message.get("id"), "error": error})
            else:
                await self._app(scope, replay, watch)
        finally:
            seen = Seen(
                http_method=scope["method"],
                rpc_method=rpc_method,
                session=headers.get(SESSION_HEADER),
                authorization=authorization,
                person=None if claims is None else str(claims["sub"]),
                status=int(answered.get("status", 0)),
                opened=answered.get("opened") if rpc_method == "initialize" else None,
            )
            with self._lock:
                self.seen.append(seen)

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A call acts for a person: without a valid token it is refused, unanswered."""
        if scope.get("arvis_rpc_method") == "tools/call" and not isinstance(
            scope.get("user"), AuthenticatedUser
        ):
            await _json(send, 401, {"error": "invalid_token"})
            return
        await self._manager.handle_request(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        # The SDK's manager must be entered and left by one task: the lifespan's.
        await receive()
        async with self._manager.run():
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})


async def _json(send: Send, status: int, body: Any) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def _person(ctx: ServerRequestContext[Any]) -> str | None:
    request = ctx.request
    user = None if request is None else getattr(request, "scope", {}).get("user")
    if isinstance(user, AuthenticatedUser):
        return user.access_token.subject
    return None

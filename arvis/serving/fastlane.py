"""``POST /v1/syscalls`` without FastAPI's per-request machinery, for the calls
that need none of it.

On every call FastAPI builds a Request, resolves the route's dependencies and
wraps the endpoint in its exception middleware: about as much CPU as the
governed call itself (docs/benchmarks.md). The fast lane answers a syscall
that validates, from a key that authenticates and holds the agent role, with
the route's own parts: ``authenticate``, the ``Syscall`` model, ``execute`` and
``error_response``. Anything else (no bearer token, a key that does not
authenticate or lacks the role, a body that does not validate) goes on to the
route with its body replayed, and the route answers it as it always has. The
route also remains the OpenAPI declaration.

It sits inside the body guard, so bodies are already bounded, JSON and free of
repeated member names, and parsed once: the lane validates the value the guard
parsed. It also sits inside the deadline and the access log.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arvis.api.routes.syscalls import execute
from arvis.identity.errors import IdentityRefusal
from arvis.lifecycle.request import Syscall
from arvis.web.identity import authenticate, scope_log_fields, subject_token_of
from arvis.web.middleware import PARSED_BODY, replay
from arvis.web.problems import error_response

PATH = "/v1/syscalls"


class SyscallFastLane:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        onward = replay(await _body(receive), receive)
        syscall = _syscall(scope.get("state", {}).get(PARSED_BODY, _ABSENT))
        token = _bearer(scope)
        if syscall is None or token is None:
            await self.app(scope, onward, send)
            return
        state = scope["app"].state
        fields = scope_log_fields(scope)
        try:
            identity = await authenticate(
                state.kernel, token, fields, subject_token=subject_token_of(scope)
            )
        except IdentityRefusal:
            identity = None
        except Exception as exc:  # e.g. the store is unavailable: as the route answers
            await error_response(exc)(scope, onward, send)
            return
        if identity is None or not identity.has_role("agent"):
            await self.app(scope, onward, send)
            return
        try:
            response = await execute(syscall, identity, state.kernel, fields)
        except Exception as exc:
            response = error_response(exc)
        await response(scope, onward, send)


async def _body(receive: Receive) -> bytes:
    chunks = []
    more = True
    while more:
        message: Message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


_ABSENT = object()


def _syscall(parsed: Any) -> Syscall | None:
    """The body the guard parsed, validated as FastAPI would (the model, in Python
    mode), or None: no JSON body, or one that does not validate."""
    if parsed is _ABSENT:
        return None
    try:
        return Syscall.model_validate(parsed)
    except ValidationError:
        return None


def _bearer(scope: Scope) -> str | None:
    """The credentials of ``Authorization: Bearer …``, read as FastAPI's HTTPBearer does."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            header: str = value.decode("latin-1")
            scheme, _, credentials = header.partition(" ")
            if scheme.lower() == "bearer" and credentials:
                return credentials
            return None
    return None

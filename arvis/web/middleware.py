"""ASGI middleware: bounded request bodies, JSON-only bodies, a request deadline, one log
line per request.

The body limit is enforced while the body streams in, whatever Content-Length
says (or does not say): a client can neither make the server buffer more than
``max_body_bytes`` nor get a body past the limit by lying about its length.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arvis.web.problems import problem

access_log = logging.getLogger("arvis.access")

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NUL = b"%00"
"""A NUL, percent-encoded: the only way one can be in a query string."""


def _is_form(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/x-www-form-urlencoded"


# The operator console's pages post HTML forms (arvis.console): bounded like any body.
CONSOLE_PREFIX = "/console/"
SLACK_PREFIX = "/slack/"
FORM_PREFIXES = (CONSOLE_PREFIX, SLACK_PREFIX)
"""Where form bodies are accepted: the console's forms, Slack's interactions."""


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class BodyGuard:
    """413 ``body_too_large`` past the limit; 415 for a body that is not JSON; 422
    ``validation_error`` for a query string holding a NUL (``%00``), which no text column
    of PostgreSQL can hold: every filter a route passes to the database is text."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _NUL in scope.get("query_string", b"").lower():
            await problem("validation_error", "a query parameter holds a NUL character")(
                scope, receive, send
            )
            return
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await problem("malformed_body", "Content-Length is not a number")(
                    scope, receive, send
                )
                return
            if int(declared) > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                await self._too_large(scope, receive, send)
                return
        content_type = headers.get("content-type", "")
        if scope["path"].startswith(FORM_PREFIXES) and _is_form(content_type):
            await self.app(scope, replay(bytes(body), receive), send)
            return
        if body and not _is_json(content_type):
            await problem("unsupported_media_type", "request bodies must be application/json")(
                scope, receive, send
            )
            return
        if body:
            try:
                parsed = json.loads(bytes(body), object_pairs_hook=_unique_members)
            except _RepeatedName:
                await problem("malformed_body", "a JSON object in the body repeats a member name")(
                    scope, receive, send
                )
                return
            except (ValueError, RecursionError):
                pass  # not JSON at all: the route answers malformed_body itself
            else:
                scope.setdefault("state", {})[PARSED_BODY] = parsed
        await self.app(scope, replay(bytes(body), receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            "body_too_large", f"request bodies are limited to {self.max_body_bytes} bytes"
        )
        # The rest of the body is never read; the connection must not be reused.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


# Where the body guard leaves the body it parsed, for the syscall fast lane.
PARSED_BODY = "arvis_parsed_body"


class _RepeatedName(ValueError):
    """A JSON object repeats a member name.

    Parsers disagree on which duplicate wins (ours keeps the last, others the
    first), so a proxy, a policy engine and ARVIS could each see a different
    decision in one body. RFC 8785 canonicalisation presumes I-JSON, which
    forbids duplicates; the body guard refuses them.
    """


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _RepeatedName
    return members


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that answers ``body`` first, then whatever the client sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class Deadline:
    """503 ``request_timeout`` when no answer has started within ``timeout_s``.

    The work itself is not cancelled: a syscall that was admitted has an intent
    in the outbox, and cancelling it would leave that intent unsettled until this
    instance dies. It runs on, is journaled, and a re-post of the same syscall
    answers its outcome (``deduplicated``) or ``attempt_in_flight`` meanwhile.
    """

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self._orphans: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered_late = False
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if answered_late:
                return  # the client already has its 503
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        async def serve() -> None:
            await self.app(scope, receive, guarded_send)

        task = asyncio.create_task(serve())
        done, _ = await asyncio.wait({task}, timeout=self.timeout_s)
        if task in done or started:
            await task
            return
        answered_late = True
        self._orphans.add(task)
        task.add_done_callback(self._forget)
        await problem(
            "request_timeout",
            f"no answer within {self.timeout_s:g} s; the request goes on. Re-post the same "
            "syscall to learn its outcome",
        )(scope, receive, send)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._orphans.discard(task)
        if not task.cancelled() and task.exception() is not None:
            access_log.error("a request past its deadline failed", exc_info=task.exception())


class AccessLog:
    """One JSON line per request: method, path, status, duration, and what routes
    added (key id, run id, causal id). Never a token, a body or a payload value."""

    def __init__(self, app: ASGIApp, on_response: Callable[[str, int], None] | None = None) -> None:
        self.app = app
        self.on_response = on_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        fields: dict[str, str] = {}
        scope.setdefault("state", {})["log_fields"] = fields

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            record: dict[str, Any] = {
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                **fields,
            }
            access_log.info(json.dumps(record, sort_keys=True), extra={"fields": record})
            if self.on_response is not None:
                self.on_response(scope["method"], status)

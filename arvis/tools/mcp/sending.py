"""What the HTTP client under a streamable-HTTP session can prove about a ``tools/call``.

DESIGN §10 "Not-started needs proof": a call is journaled as not started only when
ARVIS can show nothing of it reached the server. The SDK cannot tell, so the HTTP
client every request of its transport goes through (a proxy from the environment
included) watches each ``tools/call`` POST by the ARVIS call id in its ``_meta``:

- its connection could not be made (refused, timed out connecting, no pooled slot):
  not one byte left ARVIS;
- or it never began to send its request headers, and the caller gave up first (the
  SDK timed the call out, or ended the session, before its POST got that far). Giving
  up then *abandons* the call: should its POST still get to the point of sending, it
  is stopped there, so "nothing was sent" stays true.

Both checks and marks happen on the one event loop with no await between them, so a
POST either began before the caller gave up (then the outcome is unknown) or never
will. Anything else may follow a request that arrived.

The second proof rests on the HTTP library's trace events. It fails closed: it is
trusted only once a request of the session has been seen to fire them; a request that
completed without firing them (a library that renamed its events) withdraws it for
good, and only a refused connection proves anything from then on.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, cast

import httpx2

from arvis.tools.mcp.keys import CALL_ID

log = logging.getLogger(__name__)

_SENDING = ("http11.send_request_headers.started", "http2.send_request_headers.started")
"""The trace events after which bytes of the request may be on the wire."""
_ABANDONED_KEPT = 4096
"""Abandoned call ids remembered, in case their POST is still on its way (oldest go)."""

_Trace = Callable[[str, dict[str, Any]], Awaitable[None]]


class Abandoned(httpx2.ConnectError):
    """A POST stopped before sending: its call was given up as never sent."""


class SendProof:
    """Per call id: whether its POST was refused, began sending, or was abandoned."""

    def __init__(self) -> None:
        self._refused: set[str] = set()
        self._began: set[str] = set()
        self._abandoned: OrderedDict[str, None] = OrderedDict()
        self._traced: bool | None = None
        """Whether the trace events are seen: None until a request completed."""

    def abandon_if_unsent(self, call_id: str | None) -> bool:
        """True when nothing of the call left ARVIS, and from now on nothing will.

        A call whose POST was refused; or, while the trace events are trusted, one that
        never began to send (abandoned here, so a late POST stops before its first byte).
        """
        if call_id is None:
            return False
        if call_id in self._refused:
            return True
        if self._traced is not True or call_id in self._began:
            return False
        self._abandoned[call_id] = None
        while len(self._abandoned) > _ABANDONED_KEPT:
            self._abandoned.popitem(last=False)
        return True

    def forget(self, call_id: str | None) -> None:
        """The call is settled by its caller; what was noted of it is of no more use."""
        if call_id is not None:
            self._refused.discard(call_id)
            self._began.discard(call_id)

    def watch(self, request: httpx2.Request) -> Callable[[], None]:
        """Arm ``request``'s trace; the callable returned is called once it completed."""
        call_id = _call_id_of(request)
        if call_id is not None and call_id in self._abandoned:
            raise Abandoned("the call was given up before its request was sent")
        inner = cast("_Trace | None", request.extensions.get("trace"))
        sending = False

        async def trace(name: str, info: dict[str, Any]) -> None:
            nonlocal sending
            if name in _SENDING:
                if call_id is not None:
                    if call_id in self._abandoned:
                        raise Abandoned("the call was given up before its request was sent")
                    self._began.add(call_id)
                sending = True
            if inner is not None:
                await inner(name, info)

        def completed() -> None:
            if sending and self._traced is None:
                self._traced = True
            elif not sending and self._traced is not False:
                self._traced = False
                log.warning(
                    "the HTTP client's trace events are not seen: an MCP call that ends "
                    "unanswered is journaled uncertain, never not started"
                )

        request.extensions["trace"] = trace
        return completed

    def refused(self, request: httpx2.Request) -> None:
        call_id = _call_id_of(request)
        if call_id is not None and call_id not in self._began:
            self._refused.add(call_id)


class WatchedClient(httpx2.AsyncClient):
    """The session's HTTP client, telling :class:`SendProof` what each ``tools/call`` did."""

    def __init__(self, proof: SendProof, **options: Any) -> None:
        super().__init__(**options)
        self._proof = proof

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:
        completed = self._proof.watch(request)
        try:
            response = await super().send(request, **options)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout):
            self._proof.refused(request)
            raise
        completed()
        return response


def _call_id_of(request: httpx2.Request) -> str | None:
    """The ARVIS call id a ``tools/call`` POST carries in its ``_meta``, if any."""
    try:
        message = json.loads(request.content)
        call_id = message["params"]["_meta"][CALL_ID] if message["method"] == "tools/call" else None
    except (httpx2.RequestNotRead, ValueError, TypeError, KeyError):
        return None
    return call_id if isinstance(call_id, str) else None

"""How ``arvis serve`` runs uvicorn: bounded request heads, timeouts and connections.

uvicorn's HTTP protocols bound neither the size of a request head nor the time
it may take: httptools accumulates a header value chunk by chunk, so one 60 MB
header costs seconds of event loop and hundreds of megabytes, and a client that
sends a header line every few seconds holds its connection for ever. The
protocols here are uvicorn's own (httptools, or h11 when httptools is not
installed) with a guard in front of the parser:

- a request line plus headers longer than ``max_header_bytes`` is answered 431
  ``header_too_large``; the bytes are counted before the parser sees them;
- a request head that has not fully arrived ``header_timeout_s`` after its first
  byte (after the connection opened, for a connection's first request) is
  answered 408 ``header_timeout``; a new connection that sent nothing at all is
  simply closed;
- an idle keep-alive connection closes after ``keep_alive_timeout_s`` (uvicorn's
  own timer);
- a connection whose response is complete while its request body is still
  arriving (the deadline's 503 to a slow body) is closed, not kept for the rest
  of that body;
- a client that stops reading its answers for ``write_timeout_s`` (uvicorn
  would wait for it for ever) is disconnected;
- past ``max_connections`` open connections in a worker, a new connection is
  answered 503 ``too_many_connections`` and closed;
- a client that pipelines too far ahead of its answers is disconnected:
  httptools parses every pipelined request it is fed, and each waiting one
  costs uvicorn a few kilobytes, so at most ``MAX_PIPELINED`` may wait; h11
  keeps them as unparsed bytes, at most ``max_header_bytes`` of them.

docs/http.md describes these limits for operators.
"""

from __future__ import annotations

import asyncio
import http
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from arvis.config import Settings
from arvis.web.problems import PROBLEM_MEDIA_TYPE, problem_document

# How long a refused connection goes on reading (and dropping) what the client
# still sends. Closing a socket with unread data resets the connection, and a
# reset can reach the client before it has read the refusal.
LINGER_S = 1.0

# Requests one connection may have parsed and waiting behind the one being
# answered (httptools); while any wait, the parser is fed in small steps so that
# it cannot queue many more than this before the guard looks.
MAX_PIPELINED = 64
PIPELINED_STEP = 4096


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds one worker puts on its connections (see the module's docstring)."""

    max_header_bytes: int = 64 * 1024
    header_timeout_s: float = 10.0
    keep_alive_timeout_s: int = 5
    max_connections: int = 512
    write_timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            max_header_bytes=settings.max_header_bytes,
            header_timeout_s=settings.header_timeout_s,
            keep_alive_timeout_s=settings.keep_alive_timeout_s,
            max_connections=settings.max_connections,
            write_timeout_s=settings.request_timeout_s,
        )


class _HeadGuard(asyncio.Protocol):
    """What the bounded protocols put in front of uvicorn's parser.

    A mixin: it precedes a uvicorn protocol in the bases, and the subclass says
    what state its parser is in (``_awaiting_head`` and the pipeline hooks).
    """

    # Set by the uvicorn protocol this mixes into; ``cycle`` is its latest
    # request/response cycle (each protocol has a class of its own, with the same
    # ``response_complete`` and ``more_body``).
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    server_state: ServerState
    flow: FlowControl
    cycle: Any

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # The next class in the bases is the uvicorn protocol, which takes these.
        uvicorn_protocol: Any = super()
        uvicorn_protocol.__init__(config, server_state, app_state, _loop)
        self.limits = config.limits if isinstance(config, ServerConfig) else ConnectionLimits()
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # What the subclass knows of its parser.

    def _awaiting_head(self) -> bool:
        """Whether bytes arriving now belong to a request line or headers."""
        raise NotImplementedError

    def _answering(self) -> bool:
        """Whether a response is being written right now."""
        return self.cycle is not None and not self.cycle.response_complete

    def _body_unfinished(self) -> bool:
        """Whether the current request's body has not all arrived."""
        return self.cycle is not None and bool(self.cycle.more_body)

    def _pipelining(self) -> bool:
        """Whether parsed requests wait behind the one being answered."""
        raise NotImplementedError

    def _pipeline_full(self) -> bool:
        """Whether the requests waiting for their turn hold too much."""
        raise NotImplementedError

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if len(self.server_state.connections) > self.limits.max_connections:
            self._refused = True
            self.transport.write(
                self._refusal(
                    "too_many_connections",
                    f"this server holds {self.limits.max_connections} connections; retry later",
                )
            )
            self.transport.close()
            return
        self._start_head_clock()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: read and drop
        limit = self.limits.max_header_bytes
        start = 0
        # The parser gets the data in pieces, so that a request head is counted
        # before the parser buffers it, and refused at the limit. (A head that
        # begins inside a piece, behind another request, is counted from the next
        # piece on: it may reach twice the limit, never more.)
        while start < len(data):
            step = PIPELINED_STEP if self._pipelining() else limit
            awaiting = self._awaiting_head()
            if awaiting:
                room = limit - self._head_bytes
                if room <= 0:
                    self._refuse(
                        "header_too_large",
                        f"a request line and its headers are limited to {limit} bytes",
                    )
                    return
                self._start_head_clock()
                step = min(step, room)
                self._head_bytes += min(step, len(data) - start)
            end = start + step
            piece = data[start:end]
            start = end
            cycle = self.cycle
            super().data_received(piece)
            if self.transport.is_closing() or self._refused:
                return
            if self.cycle is not cycle:
                self._head_done()  # what follows in the piece is body or the next request
            if self._pipeline_full():
                self._refused = True
                self.transport.close()
                return

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        for timer in (self._linger_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        self._linger_timer = self._write_timer = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(
                self.limits.write_timeout_s, self.transport.abort
            )

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().resume_writing()

    # The guard.

    def _start_head_clock(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _head_done(self) -> None:
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._refused:
            return
        if self.flow.read_paused:
            # uvicorn stopped reading (a pipelined request waits its turn): the
            # delay is the server's, not the client's.
            self._start_head_clock()
            return
        if self._head_bytes == 0:
            # Nothing of a request arrived: nothing to answer.
            self._refused = True
            self.transport.close()
            return
        within = self.limits.header_timeout_s
        self._refuse(
            "header_timeout", f"a request line and its headers must arrive within {within:g} s"
        )

    def _refuse(self, code: str, detail: str) -> None:
        if self._answering():
            # A pipelined response is on the wire: a refusal would corrupt it.
            self._refused = True
            self.transport.close()
            return
        self.transport.write(self._refusal(code, detail))
        self._linger_then_close()

    def _complete_response(self, complete: Callable[[], None]) -> None:
        """Run uvicorn's ``on_response_complete`` (``complete``) under the guard."""
        unfinished = self._body_unfinished()
        cycle = self.cycle
        complete()
        if self.cycle is not cycle:
            self._head_done()  # h11 parsed a pipelined request head it had kept
        if unfinished and not self.transport.is_closing():
            self._linger_then_close()

    def _linger_then_close(self) -> None:
        self._refused = True
        self._head_done()
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def _refusal(self, code: str, detail: str) -> bytes:
        document = problem_document(code, detail)
        body = json.dumps(document).encode()
        status = http.HTTPStatus(document["status"])
        headers = [
            *self.server_state.default_headers,
            (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        head = [f"HTTP/1.1 {status.value} {status.phrase}\r\n".encode()]
        head.extend(name + b": " + value + b"\r\n" for name, value in headers)
        return b"".join([*head, b"\r\n", body])


class BoundedH11Protocol(_HeadGuard, H11Protocol):
    """uvicorn's h11 protocol, bounded (used when httptools is not installed)."""

    def _awaiting_head(self) -> bool:
        return self.conn.their_state is not h11.SEND_BODY

    def _pipelining(self) -> bool:
        return False  # h11 parses a pipelined request only once its turn comes

    def _pipeline_full(self) -> bool:
        unparsed, _ = self.conn.trailing_data
        return len(unparsed) > self.limits.max_header_bytes

    def on_response_complete(self) -> None:
        self._complete_response(super().on_response_complete)


FASTEST_PROTOCOL: type[asyncio.Protocol] = BoundedH11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is an optional speed-up; h11 always comes with uvicorn
    pass
else:

    class BoundedHttpToolsProtocol(_HeadGuard, HttpToolsProtocol):
        """uvicorn's httptools protocol, bounded."""

        _in_body = False
        """Whether the parser is inside a request's body (set per connection)."""

        def _awaiting_head(self) -> bool:
            return not self._in_body

        def _pipelining(self) -> bool:
            return bool(self.pipeline)

        def _pipeline_full(self) -> bool:
            return len(self.pipeline) > MAX_PIPELINED

        def on_headers_complete(self) -> None:
            self._in_body = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._in_body = False
            super().on_message_complete()

        def on_response_complete(self) -> None:
            self._complete_response(super().on_response_complete)

    FASTEST_PROTOCOL = BoundedHttpToolsProtocol


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration, with the bounded protocol and its limits."""

    def __init__(self, app: Any, *, limits: ConnectionLimits, **options: Any) -> None:
        super().__init__(
            app,
            http=FASTEST_PROTOCOL,
            ws="none",  # no route speaks WebSocket: no upgrade path to guard
            timeout_keep_alive=limits.keep_alive_timeout_s,
            h11_max_incomplete_event_size=limits.max_header_bytes,
            **options,
        )
        self.limits = limits

"""The HTTP floor: the least a served, durable call can cost on this machine.

A bare ASGI app, served by the very uvicorn configuration ``arvis serve`` uses
(:class:`arvis.serving.server.ServerConfig`: the same bounded httptools protocol,
limits, keep-alive and ``--workers``), answering ``POST /v1/syscalls`` by reading the
body, parsing its JSON, doing two autocommit ``INSERT`` statements (each on its own
checkout of a psycopg async pool with prepared statements, as ARVIS's two steps are)
and answering a small JSON document. No authentication, no validation, no hashing:
everything ARVIS does beyond this is what the ratio to this floor measures.

``python -m bench.httpfloor DATABASE_URL PORT WORKERS`` serves it until SIGTERM.
:func:`two_inserts` is also what the in-process async floor of bench/httpside.py runs.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from arvis.store.engine import libpq_url
from bench.floor import DDL, INSERT

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def open_pool(url: str, max_size: int = 10) -> AsyncConnectionPool:
    """The pool ARVIS's statements run on, configured alike (arvis.store.pool)."""
    return AsyncConnectionPool(
        libpq_url(url),
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "prepare_threshold": 0},
        open=False,
    )


async def two_inserts(pool: AsyncConnectionPool, n: int) -> None:
    """The floor's two durable steps: two single-row autocommit INSERTs."""
    for step in (1, 2):
        async with pool.connection() as conn:
            await conn.execute(INSERT, (Jsonb({"i": n, "step": step}),))


class FloorApp:
    """The ASGI app: ``/readyz`` answers 200, anything else is one floor call."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pool: AsyncConnectionPool | None = None
        self.numbers = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] == "/readyz":
            await _answer(send, b'{"status":"ready"}')
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        request = json.loads(body)
        assert self.pool is not None
        await two_inserts(self.pool, next(self.numbers))
        answer = {"outcome": "executed", "causal_id": request.get("causal_id"), "result": {}}
        await _answer(send, json.dumps(answer, separators=(",", ":")).encode())

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.pool = open_pool(self.url)
                await self.pool.open(wait=True)
                async with self.pool.connection() as conn:
                    await conn.execute(DDL)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.pool is not None:
                    await self.pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _answer(send: Send, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def create_app() -> FloorApp:
    import os

    return FloorApp(os.environ["ARVIS_BENCH_FLOOR_URL"])


def main(url: str, port: int, workers: int) -> None:
    """Serve the floor as ``arvis serve`` serves ARVIS (arvis.serving.process.serve)."""
    import os

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from arvis.serving.server import ConnectionLimits, ServerConfig

    os.environ["ARVIS_BENCH_FLOOR_URL"] = url
    config = ServerConfig(
        "bench.httpfloor:create_app",
        limits=ConnectionLimits(),
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
    )
    if workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

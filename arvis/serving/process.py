"""The ``arvis serve`` process: its listening socket, and uvicorn run on it with the
bounded protocol of :mod:`arvis.serving.server` (one process, or a supervisor and
``--workers N``)."""

from __future__ import annotations

import contextlib
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

from arvis.config import Settings
from arvis.serving.server import ConnectionLimits, ServerConfig
from arvis.web.logs import configure_json_logging

# uvicorn.run's exit status when the server could not start.
STARTUP_FAILURE = 3


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one); ``OSError`` when it is
    taken. Made before anything says it serves, so a port in use is the one line.

    It is made with an explicit ``IPPROTO_TCP``: asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) only on accepted sockets whose protocol is ``IPPROTO_TCP``;
    ``socket.create_server`` makes protocol 0, and every request on a keep-alive
    connection then waited ~40 ms for the client's delayed ACK. Inheritable, so worker
    processes accept on it.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
        listener.set_inheritable(True)
    except BaseException:
        listener.close()
        raise
    return listener


def serve(
    settings: Settings,
    listener: socket.socket,
    *,
    workers: int,
    metrics: socket.socket | None = None,
) -> None:
    """Serve the HTTP API on ``listener`` (and ``/metrics`` alone on ``metrics``, the
    socket of ``ARVIS_METRICS_PORT``) until stopped: what ``arvis serve`` does once the
    deployment and the database were checked. Exits 3 when it cannot start."""
    host, port = listener.getsockname()[:2]
    sockets = [listener] if metrics is None else [listener, metrics]
    config = ServerConfig(
        "arvis.serving.app:create_served_app",
        limits=ConnectionLimits.from_settings(settings),
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level.lower(),
        access_log=False,
    )
    # After uvicorn's own logging set-up (in the config): the supervisor of --workers N
    # logs JSON lines too, like its workers (which set theirs in create_served_app).
    configure_json_logging(settings.log_level)
    server = uvicorn.Server(config)
    # As uvicorn.run: a Ctrl-C before uvicorn's own signal handlers are in place
    # ends the server quietly.
    with contextlib.suppress(KeyboardInterrupt):
        if workers > 1:
            Multiprocess(config, sockets=sockets).run()
            return
        server.run(sockets=sockets)
    if not server.started:
        sys.exit(STARTUP_FAILURE)

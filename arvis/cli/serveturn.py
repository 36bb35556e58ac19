"""``arvis serve-turn RUN``: one ARVIS instance for one agent turn (docs/deploy.md).

An orchestrator starts it when a turn begins and stops it (SIGTERM) when the turn
ends, against the deployment's shared PostgreSQL. It claims a lease of its own,
settles what expired instances left, and serves the HTTP API on the given port or
a free one, admitting syscalls of RUN only (another run's: 421 ``run_not_served``).
Once it answers, it prints one JSON line on stdout::

    {"event": "ready", "url": …, "host": …, "port": …, "run_id": …, "lease": …,
     "instance_id": …, "pid": …}

and one more when it has stopped, released its lease and is about to exit::

    {"event": "stopped", "signal": "SIGTERM", "drained": true, "unjournaled": 0, "exit_code": 0}

Everything else (logs) goes to stderr. How it stops is ``arvis.cli.instance``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from arvis.cli.common import fail, settings_or_exit, with_kernel
from arvis.cli.instance import Ending, StopRequest, exit_with, wind_down
from arvis.domain.ids import ID_PATTERN

if TYPE_CHECKING:
    import uvicorn

    from arvis.kernel import Kernel
    from arvis.lifecycle.syscalls import SyscallObserver
    from arvis.web.metrics import ApiMetrics

# After the drain, what is left on the sockets are idle keep-alive connections.
_CLOSE_CONNECTIONS_S = 1


def serve_turn(
    run: Annotated[str, typer.Argument(help="The run whose syscalls this instance admits.")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port; 0 takes a free one.")] = 0,
) -> None:
    """Serve one agent turn: admit RUN's syscalls until SIGTERM, then drain and exit.

    Prints one JSON line on stdout once it answers (its URL, port, run, lease, pid)
    and one when it stops. Exits 0 when every call it admitted is journaled, 1 when
    one is not (recovery then journals it as uncertain).
    """
    if not re.fullmatch(ID_PATTERN, run):
        fail(f"run id {run!r} must match {ID_PATTERN}", 2)
    settings = settings_or_exit().model_copy(update={"turn_run_id": run})
    from arvis.web.logs import configure_json_logging

    configure_json_logging(settings.log_level)
    from arvis.web.metrics import ApiMetrics

    metrics = ApiMetrics()
    ending = with_kernel(
        lambda kernel: _serve(kernel, metrics, host, port),
        settings=settings,
        observer=metrics,
    )
    _emit(
        {
            "event": "stopped",
            "signal": ending.stopped_by,
            "drained": ending.drained,
            "unjournaled": ending.unjournaled,
            "exit_code": ending.exit_code,
        }
    )
    exit_with(ending)


async def _serve(kernel: Kernel, metrics: ApiMetrics, host: str, port: int) -> Ending:
    from arvis.serving.process import listen

    try:
        listener = listen(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    with StopRequest() as stop:
        # Before the first admission: the lease, and what expired instances left.
        await kernel.start()
        server = _server(kernel, metrics, lambda: _emit(_ready(kernel, host, listener)))
        stopping = asyncio.ensure_future(_stop_when_asked(kernel, server, stop))
        try:
            await server.serve(sockets=[listener])
        except SystemExit:
            # uvicorn's answer to a failed start; its log says why.
            pass
        finally:
            listener.close()
        if stopping.done():
            return stopping.result()
        stopping.cancel()
        return await wind_down(kernel, stop.signal)


async def _stop_when_asked(kernel: Kernel, server: uvicorn.Server, stop: StopRequest) -> Ending:
    await stop.wait()
    # Still listening while it drains: a late syscall is told 503 shutting_down
    # rather than finding the port closed.
    ending = await wind_down(kernel, stop.signal)
    server.should_exit = True
    return ending


def _server(
    kernel: Kernel, metrics: ApiMetrics, on_listening: Callable[[], None]
) -> uvicorn.Server:
    import uvicorn

    from arvis.serving.app import create_app
    from arvis.serving.server import ConnectionLimits, ServerConfig

    async def provide(*, observer: SyscallObserver) -> Kernel:
        return kernel  # built with the observer of ``metrics`` (see serve_turn)

    settings = kernel.settings
    app = create_app(
        provide,
        max_body_bytes=settings.max_body_bytes,
        request_timeout_s=settings.request_timeout_s,
        environment=settings.env,
        owns_kernel=False,
        metrics=metrics,
    )

    class TurnServer(uvicorn.Server):
        """uvicorn without its signal handlers (this command stops on its own terms),
        saying when it listens."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                on_listening()

    # The connection limits of `arvis serve` (arvis.serving.server), on this one process.
    config = ServerConfig(
        app,
        limits=ConnectionLimits.from_settings(settings),
        lifespan="on",
        log_config=None,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=_CLOSE_CONNECTIONS_S,
    )
    return TurnServer(config)


def _ready(kernel: Kernel, host: str, listener: socket.socket) -> dict[str, Any]:
    port = int(listener.getsockname()[1])
    reachable = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    shown = f"[{reachable}]" if ":" in reachable else reachable
    return {
        "event": "ready",
        "url": f"http://{shown}:{port}",
        "host": host,
        "port": port,
        "run_id": kernel.settings.turn_run_id,
        "lease": kernel.lifecycle.lease.name,
        "instance_id": kernel.instance_id,
        "pid": os.getpid(),
    }


def _emit(line: dict[str, Any]) -> None:
    typer.echo(json.dumps(line))

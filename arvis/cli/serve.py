"""``arvis migrate``, ``serve`` and ``quickstart``: the schema and the server."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from arvis import __version__
from arvis.cli.common import (
    database_or_exit,
    deployment_or_exit,
    fail,
    require_schema,
    settings_or_exit,
)
from arvis.cli.keys import DEMO_KEYS_FILE, DEMO_TENANT, ensure_demo_keys
from arvis.client import KEY_VARIABLE, URL_VARIABLE
from arvis.config import Settings
from arvis.store.database import DatabaseTarget
from arvis.store.errors import NotDistributable, translate
from arvis.store.migrate import check_distributable, upgrade
from arvis.store.migrate import distribute as distribute_schema

log = logging.getLogger("arvis.serve")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
    app.command("serve")(serve)
    app.command("quickstart")(quickstart)


def migrate(
    distribute: Annotated[
        bool,
        typer.Option(
            "--distribute",
            help="On a Citus coordinator: shard the schema by tenant (docs/scaling.md).",
        ),
    ] = False,
) -> None:
    """Bring the database schema to this version's head. Safe to run again."""
    settings = settings_or_exit()
    target = database_or_exit(settings)
    try:
        if distribute:
            # Refused before anything is migrated: on a plain server, on a worker, or
            # on a coordinator without workers.
            check_distributable(target.url)
        before, after = upgrade(target.url)
        placed = distribute_schema(target.url) if distribute else ()
    except NotDistributable as exc:
        fail(f"cannot distribute: {exc.message}")
    except Exception as exc:
        domain = translate(exc)
        fail(domain.message if domain else f"migration failed: {exc}")
    if before == after:
        typer.echo(f"database already at revision {after}; nothing to do")
    else:
        typer.echo(f"database migrated from {before or 'empty'} to revision {after}")
    if distribute:
        typer.echo(
            f"distributed on Citus: placed {len(placed)} tables and functions"
            if placed
            else "already distributed on Citus; nothing to do"
        )


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes.")] = 1,
) -> None:
    """Serve the HTTP API. Refuses a database that is not migrated to this version."""
    settings = settings_or_exit()
    deployment_or_exit(settings)
    target = database_or_exit(settings)
    require_schema(target.url)
    _serve(settings, target, host=host, port=port, workers=workers)


def quickstart(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
) -> None:
    """Migrate, make sure the demo tenant has keys, then serve: a newcomer's first minutes."""
    settings = settings_or_exit()
    deployment_or_exit(settings)
    target = database_or_exit(settings)
    before, after = upgrade(target.url)
    if before != after:
        typer.echo(f"database migrated to revision {after}", err=True)

    tokens, minted = ensure_demo_keys(target.url, settings.data_dir)
    _print_welcome(settings, host, port, tokens, minted)
    _serve(settings, target, host=host, port=port, workers=1)


def _print_welcome(
    settings: Settings, host: str, port: int, tokens: dict[str, str], minted: bool
) -> None:
    keys_file = (settings.data_dir / DEMO_KEYS_FILE).resolve()
    url = f"http://{host}:{port}"
    echo = typer.echo
    if minted:
        echo(f"Created tenant {DEMO_TENANT!r} with one API key per role (shown only now):")
        for role, token in tokens.items():
            echo(f"  {role:<9} {token}")
        echo(f"They are also saved, readable only by you, in {keys_file}")
    else:
        echo(f"Demo keys of tenant {DEMO_TENANT!r}: {keys_file} (created at the first start)")
    echo("")
    echo(f"ARVIS is at {url}  (API docs: {url}/docs)")
    echo(f"Operator console: {url}/console  (sign in with the approver, auditor or admin key)")
    echo("Post a first syscall:")
    echo("")
    echo(f"  export {URL_VARIABLE}={url}")
    echo(f"  {_key_export('agent', keys_file)}")
    echo(f"  curl -s -X POST {url}/v1/syscalls \\")
    echo(f'    -H "Authorization: Bearer ${KEY_VARIABLE}" -H "Content-Type: application/json" \\')
    body = (
        '{"name": "tool.execute", "run_id": "demo-run", "causal_id": "step-1",'
        ' "decision": {"tool": "echo", "payload": {"hello": "world"}}}'
    )
    echo(f"    -d {shlex.quote(body)}")
    echo("")
    echo(f"Read it back with the auditor's key ({URL_VARIABLE} and {KEY_VARIABLE} make arvis ask")
    echo("the server instead of the database):")
    echo("")
    echo(f"  {_key_export('auditor', keys_file)}")
    echo("  arvis journal demo-run && arvis verify demo-run")
    echo("")
    echo("Then follow the walk-through in README.md.")


def _key_export(role: str, keys_file: Path) -> str:
    reader = f"import json,sys; print(json.load(open(sys.argv[1]))[{role!r}])"
    reading = f"python3 -c {shlex.quote(reader)} {shlex.quote(str(keys_file))}"
    return f"export {KEY_VARIABLE}=$({reading})"


def _serve(
    settings: Settings, target: DatabaseTarget, *, host: str, port: int, workers: int
) -> None:
    from arvis.serving import process
    from arvis.serving.metricsport import METRICS_HOST
    from arvis.web.logs import configure_json_logging

    # Workers are separate processes: they reach the (possibly embedded) database
    # through the URL this parent resolved, and never start their own server.
    os.environ["ARVIS_DATABASE_URL"] = target.url
    # uvicorn re-raises SIGTERM after its graceful shutdown; exiting through
    # SystemExit instead lets the embedded PostgreSQL be stopped at exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Listening before saying so: a port in use is one error line, never "serving on".
    listener = _listen(host, port)
    metrics = None
    if settings.metrics_port is not None:
        metrics = _listen(METRICS_HOST, settings.metrics_port)
    # JSON lines on stderr from here on, this process's too (docs/http.md, "Logs").
    configure_json_logging(settings.log_level)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{listener.getsockname()[1]}"
    fields: dict[str, object] = {
        "event": "serving",
        "message": f"ARVIS {__version__} serving on {url}",
        "url": url,
        "workers": workers,
    }
    if metrics is not None:
        fields["metrics_url"] = f"http://{METRICS_HOST}:{settings.metrics_port}/metrics"
    log.info("serving", extra={"fields": fields})
    process.serve(settings, listener, workers=workers, metrics=metrics)


def _listen(host: str, port: int) -> socket.socket:
    from arvis.serving.process import listen

    try:
        return listen(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")

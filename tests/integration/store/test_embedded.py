"""The embedded PostgreSQL starts, is shared, and fails with one clear sentence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from arvis.store.embedded import EmbeddedPostgresError, start_embedded
from arvis.store.engine import libpq_url

pytestmark = pytest.mark.skipif(
    os.environ.get("ARVIS_TEST_DATABASE_URL") is not None,
    reason="embedded PostgreSQL is exercised in the embedded run",
)


def _pid(url: str) -> int:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT pg_backend_pid(), current_setting('data_directory')").fetchone()
        assert row is not None
        return int(row[0])


def test_embedded_postgres_starts_and_a_second_start_reuses_it(tmp_path: Path) -> None:
    first = start_embedded(tmp_path)
    try:
        assert _pid(first.url) > 0
        postmaster = (first.pgdata / "postmaster.pid").read_text().split()[0]
        # A second process asking for the same data directory gets the same server.
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "from pathlib import Path; from arvis.store.embedded import start_embedded;"
                f"s = start_embedded(Path({str(tmp_path)!r})); print(s.url)",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert out.stdout.strip() == first.url
        assert (first.pgdata / "postmaster.pid").read_text().split()[0] == postmaster
        # And its exit did not stop the server the first user still holds.
        assert _pid(first.url) > 0
    finally:
        first.stop()
    assert not (first.pgdata / "postmaster.pid").exists()


def test_a_data_directory_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "pgdata").write_text("not a directory")
    with pytest.raises(EmbeddedPostgresError, match="is not a directory"):
        start_embedded(tmp_path)


def test_a_foreign_non_empty_data_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "pgdata").mkdir()
    (tmp_path / "pgdata" / "holiday.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(EmbeddedPostgresError, match="not a PostgreSQL data directory"):
        start_embedded(tmp_path)


def test_a_data_directory_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(EmbeddedPostgresError, match="cannot be created"):
        start_embedded(blocker / "data")

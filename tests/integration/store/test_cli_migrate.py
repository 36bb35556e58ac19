"""`arvis migrate` is idempotent and the service refuses an unmigrated database."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arvis.store.database import PgStore
from arvis.store.errors import SchemaNotReady
from arvis.store.migrate import head_revision
from tests.support import citus
from tests.support.postgres import create_database, drop_database, sql


def _arvis(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARVIS_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "arvis", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_arvis_migrate_twice_is_a_no_op_the_second_time(pg_server_url: str) -> None:
    url = create_database(pg_server_url)
    try:
        first = _arvis("migrate", url=url)
        assert first.returncode == 0, first.stderr
        assert f"to revision {head_revision()}" in first.stdout
        second = _arvis("migrate", url=url)
        assert second.returncode == 0, second.stderr
        assert "nothing to do" in second.stdout
    finally:
        drop_database(pg_server_url, url)


async def test_the_store_refuses_an_unmigrated_database(empty_database_url: str) -> None:
    with pytest.raises(SchemaNotReady, match="arvis migrate"):
        await PgStore.open(empty_database_url)


def test_serve_refuses_an_unmigrated_database_with_what_to_run(empty_database_url: str) -> None:
    result = _arvis("serve", "--port", "0", url=empty_database_url)
    assert result.returncode == 1
    assert "run `arvis migrate`" in result.stderr


def test_arvis_version_prints_the_version() -> None:
    from arvis import __version__

    result = subprocess.run(
        [sys.executable, "-m", "arvis", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == f"arvis {__version__}"


async def test_the_store_refuses_a_database_migrated_past_this_code(pg_server_url: str) -> None:
    import psycopg

    from arvis.store.engine import libpq_url
    from arvis.store.migrate import upgrade

    url = create_database(pg_server_url)
    try:
        upgrade(url)
        with psycopg.connect(libpq_url(url)) as conn:
            conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
        with pytest.raises(SchemaNotReady, match="newer than this code"):
            await PgStore.open(url)
    finally:
        drop_database(pg_server_url, url)


def test_a_bad_setting_stops_start_up_with_one_line_naming_it(empty_database_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "arvis", "migrate"],
        capture_output=True,
        text=True,
        env={**os.environ, "ARVIS_DATABASE_URL": "mysql://nope", "ARVIS_ENV": "staging"},
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("arvis: error: ARVIS_")


@pytest.mark.skipif(citus.SELECTED, reason="every database of the Citus tier has Citus")
def test_migrate_distribute_refuses_a_server_without_citus_and_migrates_nothing(
    empty_database_url: str,
) -> None:
    result = _arvis("migrate", "--distribute", url=empty_database_url)
    assert result.returncode == 1
    assert "cannot distribute: this database is not a Citus database" in result.stderr
    assert "migrate without --distribute" in result.stderr
    assert sql(empty_database_url, "SELECT to_regclass('runs')") == [(None,)]

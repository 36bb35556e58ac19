"""Revision 0010 (a run's evidence found broken) from a database with a run, and back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arvis.store.migrate import downgrade, upgrade
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0009")
        _sql(url, "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')", "p" * 64)
        _sql(
            url,
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) VALUES"
            " ('acme', 'run-1', %s, %s)",
            "p" * 64,
            "0" * 64,
        )
        yield url
    finally:
        drop_database(pg_server_url, url)


def _columns(url: str) -> list[str]:
    rows = _sql(
        url,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
        " AND column_name LIKE 'evidence%%' ORDER BY 1",
    )
    return [str(row[0]) for row in rows]


def test_an_existing_run_is_not_flagged_and_a_flag_goes_with_the_downgrade(database: str) -> None:
    upgrade(database)
    assert _columns(database) == ["evidence_broken_at", "evidence_fault"]
    assert _sql(database, "SELECT evidence_broken_at, evidence_fault FROM runs") == [(None, None)]
    _sql(database, "UPDATE runs SET evidence_broken_at = 3, evidence_fault = 'entry altered'")

    downgrade(database, "0009")

    assert _columns(database) == []
    assert _sql(database, "SELECT run_id FROM runs") == [("run-1",)]
    upgrade(database)
    assert _sql(database, "SELECT evidence_broken_at, evidence_fault FROM runs") == [(None, None)]

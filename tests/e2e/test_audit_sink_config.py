"""The audit sink is a deployment choice (``[audit] sink``), and every receipt is checked on
every path, first attempts included (issue 12, finding 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arvis.domain.errors import ConfigurationError
from tests.support import sinks
from tests.support.http import serve_api


async def test_a_declared_sink_records_every_admission(database_url: str, tmp_path: Path) -> None:
    sinks.RECORDED.clear()
    config = '[audit]\nsink = "tests.support.sinks:recording_sink"\n'
    async with serve_api(database_url, tmp_path, config=config) as api:
        first = await api.syscall("echo", {"n": 1}, run_id="run-sink", causal_id="c1")
        second = await api.syscall("echo", {"n": 2}, run_id="run-sink", causal_id="c2")

    assert [first.status_code, second.status_code] == [200, 200]
    assert [r.json()["outcome"] for r in (first, second)] == ["executed", "executed"]
    # The sink saw each attempt, the brand-new ones included, and its receipt is the answer's.
    assert [(i.context.causal_id, i.attempt) for i in sinks.RECORDED] == [("c1", 1), ("c2", 1)]
    assert [r.json()["receipt"]["intent_commitment"] for r in (first, second)] == [
        i.commitment for i in sinks.RECORDED
    ]


async def test_a_declared_sink_with_a_foreign_receipt_runs_nothing(
    database_url: str, tmp_path: Path
) -> None:
    config = '[audit]\nsink = "tests.support.sinks:foreign_receipt_sink"\n'
    async with serve_api(database_url, tmp_path, config=config) as api:
        answer = await api.syscall("echo", {"n": 1}, run_id="run-foreign", causal_id="c1")
        intents = api.sql("SELECT count(*) FROM attempts WHERE run_id = 'run-foreign'")
        entries = api.sql("SELECT count(*) FROM journal_entries WHERE run_id = 'run-foreign'")

    assert answer.status_code == 503
    assert answer.json()["code"] == "audit_receipt_invalid"
    assert intents == [(0,)]
    assert entries == [(0,)]


async def test_an_unknown_sink_stops_start_up_naming_the_section(
    database_url: str, tmp_path: Path
) -> None:
    config = '[audit]\nsink = "tests.support.sinks:no_such_factory"\n'
    with pytest.raises(ConfigurationError, match=r"\[audit\].*no_such_factory"):
        async with serve_api(database_url, tmp_path, config=config):
            raise AssertionError("the app started with an unknown audit sink")

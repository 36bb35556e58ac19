"""Revision 0011 (issue 24) from a database of revision 0010 that holds entries, and back.

Upgrade swaps the journal writer's 25 positional parameters for one typed argument,
installs the boundary functions generated from the domain and the triggers from
``arvis/store/sql/``; no row changes. A chain begun under 0010 goes on under 0011 (and
verifies), an uncertain entry 0010 wrote is still open for resolution, and downgrade
gives 0010's writer back, which appends to the same chain again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from arvis.domain.boundary import RESOLVED_BOUNDARIES, UNCERTAIN_BOUNDARIES, EffectBoundary
from arvis.domain.ids import RunId
from arvis.domain.journal import JournalKind
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.entries import expiry
from arvis.lifecycle.writes import Binding, JournalAppend
from arvis.store.journaling import journal_record
from arvis.store.migrate import downgrade, upgrade
from tests.support.lifecycle import AGENT, make_harness
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql
from tests.support.rules import NOW, SEND, confirmation, request

RUN = "run-0011"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


def _arguments(url: str, name: str) -> list[tuple[Any, ...]]:
    return _sql(url, "SELECT pronargs FROM pg_proc WHERE proname = %s", name)


def _old_append(url: str, position: int) -> tuple[Any, ...]:
    """An uncertain attempt journaled through revision 0010's writer, by position."""
    [row] = _sql(
        url,
        "SELECT out_status, out_position FROM arvis_journal(%s, %s, 'recovery', %s, %s, 1,"
        " %s, 'EFFECT_STATE_UNKNOWN', false, %s, %s, false, false, NULL, NULL, NULL, NULL,"
        " NULL, NULL, NULL, false, NULL, NULL, %s)",
        AGENT.tenant_id,
        RUN,
        f"old-{position}",
        f"{position:064x}",
        f"int_old_{position}",
        '{"tool":"append"}',
        f"2026-12-0{position}T12:00:00.000000+00:00",
        "written by revision 0010",
    )
    return tuple(row)


def _trigger(url: str, name: str) -> str:
    [(text,)] = _sql(url, "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s", name)
    return str(text)


async def test_a_chain_of_revision_0010_goes_on_under_0011_and_back(database: str) -> None:
    harness = await make_harness(database)
    try:
        first = await harness.execute("read", run_id=RUN)
        assert first.journal_position == 1
    finally:
        await harness.close()

    downgrade(database, "0010")
    assert _arguments(database, "arvis_journal") == [(25,)]
    assert _sql(database, "SELECT 1 FROM pg_type WHERE typname = 'arvis_journal_step'") == []
    assert "arvis_uncertain" not in _trigger(database, "tr_journal_entries_notify")
    assert _old_append(database, 2) == ("appended", 2)
    assert _sql(database, "SELECT attempt FROM resolutions WHERE run_id = %s", RUN) == [(1,)]

    upgrade(database)
    # Revision 0015 puts the tenant before the typed argument.
    assert _arguments(database, "arvis_journal") == [(2,)]
    assert "arvis_uncertain(" in _trigger(database, "tr_journal_entries_notify")
    [(check,)] = _sql(
        database,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conname = 'ck_resolutions_boundary_resolved'",
    )
    assert "arvis_resolved(" in check
    assert _sql(
        database, "SELECT position, kind FROM journal_entries WHERE run_id = %s ORDER BY 1", RUN
    ) == [(1, "execution"), (2, "recovery")]

    harness = await make_harness(database, instance_id="after-upgrade")
    try:
        later = await harness.execute("read", run_id=RUN)
        assert later.journal_position == 3
        report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(RUN))
        assert (report.ok, report.entries) == (True, 3)
        uncertain = await harness.store.ops.open_uncertain(limit=10, max_asks=5)
        assert [(u.entry.position, u.entry.kind) for u in uncertain] == [(2, JournalKind.RECOVERY)]
    finally:
        await harness.close()

    downgrade(database, "0010")
    assert _arguments(database, "arvis_journal") == [(25,)]
    [(check,)] = _sql(
        database,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conname = 'ck_resolutions_boundary_resolved'",
    )
    assert "arvis_resolved" not in check
    assert _old_append(database, 4) == ("appended", 4)
    upgrade(database)
    assert _sql(database, "SELECT count(*) FROM journal_entries WHERE run_id = %s", RUN) == [(4,)]


def test_the_stores_boundary_functions_say_what_the_domain_says(database: str) -> None:
    for boundary in EffectBoundary:
        [(uncertain, resolved)] = _sql(
            database, "SELECT arvis_uncertain(%s), arvis_resolved(%s)", boundary, boundary
        )
        assert uncertain is (boundary in UNCERTAIN_BOUNDARIES), boundary
        assert resolved is (boundary in RESOLVED_BOUNDARIES), boundary


def test_the_journal_record_names_every_field_of_the_writers_argument(database: str) -> None:
    # Python builds the record by name, the statement reads it as the composite type:
    # a field added on one side only would be silently NULL (or dropped).
    attributes = {
        name
        for (name,) in _sql(
            database,
            "SELECT attname FROM pg_attribute WHERE attrelid = 'arvis_journal_step'::regclass"
            " AND attnum > 0 AND NOT attisdropped",
        )
    }
    record = confirmation(request(SEND), ConfirmationState.APPROVED)
    ending = expiry(record, NOW)
    full = JournalAppend(
        **{
            **{name: getattr(ending, name) for name in JournalAppend.__slots__},
            "key": replace(ending.key, attempt=1),
            "intent_id": "int_1",
            "settle": True,
            "release_budgets": True,
            "flag": "why",
            "bind": Binding(plan_id=None, tool="send", payload_digest="d", payload_text="{}"),
        }
    )
    assert set(json.loads(journal_record(full, "{}", "t"))) == attributes

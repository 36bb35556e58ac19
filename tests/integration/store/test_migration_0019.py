"""Revision 0019 (the journal's index of the agents that acted for a run's principal), down
to 0018 from a database that holds a run of an agent acting for a person, and up again.

The index indexes what the entries already record, so nothing is rewritten either way: the
runs list names the agent at every revision (without the index it reads the run's journal
instead), the chain verifies, and the index built on upgrade holds the entries written
before it, in the words the list's read uses."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from arvis.domain.ids import RunId
from arvis.lifecycle.runs import RunQuery
from arvis.store.engine import libpq_url
from arvis.store.migrate import downgrade, upgrade
from arvis.store.reads import _RUNS, run_summary, runs_parameters
from tests.support.lifecycle import make_harness
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql
from tests.support.rules import acting_for

RUN = "run-acted"
BOT_FOR_ALICE = acting_for("alice", "bot-a")
INDEX = "ix_journal_entries_actor"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


def _listed(url: str, actor: str | None = None) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """The runs list's own read (arvis.store.reads), at whatever revision ``url`` is."""
    query = RunQuery(containing=RUN, actor=actor)
    params = {**runs_parameters(query), "t": BOT_FOR_ALICE.tenant_id}
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.cursor(row_factory=dict_row).execute(_RUNS, params).fetchall()
    return [(r.run_id, r.principal, r.actors) for r in map(run_summary, rows)]


def _plan_of_the_list(url: str) -> str:
    """The runs list's plan with sequential scans priced out: the index is usable only if
    the read says its expression and predicate in the index's words."""
    params = {**runs_parameters(RunQuery(containing=RUN)), "t": BOT_FOR_ALICE.tenant_id}
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute("EXPLAIN " + _RUNS, params).fetchall()
    return "\n".join(row[0] for row in rows)


async def test_the_actor_index_goes_down_to_0018_and_back_and_the_list_names_the_agent(
    database: str,
) -> None:
    harness = await make_harness(database)
    try:
        ran = await harness.execute("read", run_id=RUN, identity=BOT_FOR_ALICE)
        assert ran.outcome == "executed"
        refused = await harness.execute("no.such.tool", run_id=RUN, identity=BOT_FOR_ALICE)
        assert refused.outcome == "refused"
    finally:
        await harness.close()
    listed = [(RUN, "alice", ("bot-a",))]
    assert _listed(database) == listed
    assert INDEX in _plan_of_the_list(database)
    hashes = _sql(database, "SELECT position, entry_hash FROM journal_entries ORDER BY position")

    downgrade(database, "0018")
    assert _sql(database, "SELECT to_regclass(%s)::text", INDEX) == [(None,)]
    assert _listed(database, actor="bot-a") == listed
    assert INDEX not in _plan_of_the_list(database)

    upgrade(database)
    assert _sql(database, "SELECT to_regclass(%s)::text", INDEX) == [(INDEX,)]
    assert INDEX in _plan_of_the_list(database)
    assert _listed(database, actor="bot-a") == listed
    assert _listed(database, actor="bot") == []
    assert _sql(database, "SELECT position, entry_hash FROM journal_entries ORDER BY position") == (
        hashes
    )
    harness = await make_harness(database, instance_id="after-upgrade")
    try:
        report = await harness.lifecycle.evidence.verify(BOT_FOR_ALICE.tenant_id, RunId(RUN))
        assert (report.ok, report.entries) == (True, 2)
    finally:
        await harness.close()

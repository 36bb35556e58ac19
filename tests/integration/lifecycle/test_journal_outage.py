"""A result whose journal commit fails is held, flagged, and journaled when the store returns.

The store is composed in as a :class:`tests.support.faults.FlakyStore`, whose journal
step fails like an unreachable database while the test says so.
"""

from __future__ import annotations

from typing import Any

from arvis.domain.ids import RunId
from arvis.lifecycle.ports import LifecycleStore
from arvis.store.migrate import upgrade
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.faults import FlakyStore
from tests.support.lifecycle import AGENT, Harness, make_harness
from tests.support.postgres import create_database, drop_database


async def _flaky_harness(url: str) -> tuple[Harness, FlakyStore]:
    made: list[FlakyStore] = []

    def wrap(inner: LifecycleStore) -> Any:
        made.append(FlakyStore(inner))
        return made[0]

    harness = await make_harness(url, wrap_store=wrap)
    return harness, made[0]


async def test_a_result_that_cannot_be_journaled_is_flagged_and_journaled_later(
    database_url: str,
) -> None:
    harness, store = await _flaky_harness(database_url)

    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        store.down.add("journal")
        return ToolResult.ok("done while the journal was away")

    harness.tools["write"].then(outage_during_dispatch)
    try:
        result = await harness.execute("write", {"text": "x"}, causal_id="c")

        assert result.outcome == "executed"
        assert result.result == "done while the journal was away"
        assert result.audit_incomplete is True
        assert result.journal_position is None
        assert harness.sql(
            "SELECT count(*) FROM journal_entries WHERE run_id = %s", harness.run_id
        ) == [(0,)]

        store.down.clear()
        assert await harness.lifecycle.handler.drain(10.0)

        entries = harness.sql(
            "SELECT kind, boundary, body::jsonb->>'result' FROM journal_entries WHERE run_id = %s",
            harness.run_id,
        )
        assert entries == [("execution", "EFFECT_COMPLETED", "done while the journal was away")]
        # The flag commits with the late entry, in its one statement.
        flagged = harness.sql(
            "SELECT audit_incomplete, audit_incomplete_reason FROM runs WHERE run_id = %s",
            harness.run_id,
        )
        assert flagged[0][0] is True
        assert "journaled late" in flagged[0][1]
        assert harness.in_flight() == []
        report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
        assert report.ok
        again = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert (again.outcome, again.audit_incomplete) == ("deduplicated", True)
        assert harness.tools["write"].calls == 1
    finally:
        store.down.clear()
        await harness.close()


async def test_a_held_result_that_can_never_be_journaled_is_not_retried_for_ever(
    pg_server_url: str,
) -> None:
    url = create_database(pg_server_url)
    upgrade(url)
    harness = await make_harness(url)

    async def schema_gone_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        # The journal step's function disappears (a botched migration underneath).
        harness.sql("DROP FUNCTION arvis_journal")
        return ToolResult.ok("done")

    harness.tools["write"].then(schema_gone_during_dispatch)
    try:
        result = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert (result.outcome, result.audit_incomplete) == ("executed", True)
        # An unmigrated schema never heals by waiting: the held result gives up
        # instead of retrying for the life of the process.
        assert await harness.lifecycle.handler.drain(5.0)
    finally:
        await harness.close()
        drop_database(pg_server_url, url)

"""The run's lock is a row lock on the run's row (revision 0015, issue 28).

DESIGN §5: a run's chain is appended under a row lock on the run. It lives with the
run's row, so on Citus it holds on the worker of the run's shard whichever node runs the
step (an advisory lock, as before, held on the node that ran the step only). Here: a
transaction holding the run's row makes every step of that run wait, and a run's first
two steps, racing, both land on the one row. On Citus (make test-citus) the racing
first step held open is run on the coordinator (a call inside a transaction is never
pushed down) and the harness's is pushed down to the worker: with the advisory lock the
second failed with a duplicate key on ``runs`` (issue 28).
"""

from __future__ import annotations

import asyncio

import psycopg

from arvis.lifecycle.results import SyscallResult
from arvis.store.engine import libpq_url
from tests.support.lifecycle import AGENT, Harness

# Backends of this database waiting for a lock: on Citus, of every node (the step may
# run on the worker of the run's shard), else of this server.
_WAITING_SQL = """
    SELECT count(*) FROM {activity}
     WHERE datname = current_database() AND wait_event_type = 'Lock'"""


async def _someone_waits(harness: Harness) -> None:
    citus = harness.sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    query = _WAITING_SQL.format(activity="citus_stat_activity" if citus else "pg_stat_activity")
    for _ in range(600):
        if harness.sql(query)[0][0] > 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no step waited for the run's row")


async def _step_behind(harness: Harness, sql: str, *params: object) -> SyscallResult:
    """A step of the harness's run, posted while another session's open transaction has
    run ``sql``: it waits until that transaction commits, then completes."""
    async with await psycopg.AsyncConnection.connect(libpq_url(harness.url)) as conn:
        await conn.execute(sql, params)
        step = asyncio.create_task(harness.execute("read", {"n": 2}))
        await _someone_waits(harness)
        assert not step.done()
        await conn.commit()
    return await step


async def test_a_step_waits_while_another_transaction_holds_the_runs_row(
    harness: Harness,
) -> None:
    first = await harness.execute("read", {"n": 1})
    assert first.journal_position == 1

    second = await _step_behind(
        harness,
        "SELECT 1 FROM runs WHERE tenant_id = %s AND run_id = %s FOR NO KEY UPDATE",
        AGENT.tenant_id,
        harness.run_id,
    )

    assert second.outcome == "executed"
    assert second.journal_position == 2
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, first.run_id)
    assert (report.ok, report.entries) == (True, 2)


async def test_the_first_steps_of_a_new_run_racing_share_its_one_row(harness: Harness) -> None:
    # Another session's first step of the run has created its row, not yet committed.
    [(plan_id,)] = harness.sql("SELECT plan_id FROM tool_plans LIMIT 1")
    result = await _step_behind(
        harness,
        "SELECT out_status FROM arvis_bind(%s, %s, %s, NULL, NULL, NULL, NULL, NULL, %s)",
        AGENT.tenant_id,
        harness.run_id,
        plan_id,
        AGENT.principal_id,
    )

    assert result.outcome == "executed"
    assert result.journal_position == 1
    assert harness.sql("SELECT count(*) FROM runs WHERE run_id = %s", harness.run_id) == [(1,)]

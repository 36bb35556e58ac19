"""A result whose journal commit fails is held, flagged, and journaled when the store returns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from arvis.domain.errors import StoreUnavailable
from arvis.domain.ids import RunId
from arvis.store.database import PgStore
from arvis.store.migrate import upgrade
from arvis.store.uow import PgUnitOfWork
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, make_harness
from tests.support.postgres import create_database, drop_database


class FlakyStore(PgStore):
    """A store whose new transactions fail while ``down`` is set."""

    down = False

    def unit_of_work(self) -> PgUnitOfWork:
        if self.down:
            raise StoreUnavailable("the database is unreachable (test)")
        return super().unit_of_work()


class FlakyFastPath:
    """The hot path of a FlakyStore: its statements fail while the store is down."""

    def __init__(self, store: FlakyStore, inner: Any) -> None:
        self.store = store
        self.inner = inner

    async def admit(self, **kwargs: Any) -> Any:
        self._check()
        return await self.inner.admit(**kwargs)

    async def journal_execution(self, **kwargs: Any) -> Any:
        self._check()
        return await self.inner.journal_execution(**kwargs)

    def _check(self) -> None:
        if self.store.down:
            raise StoreUnavailable("the database is unreachable (test)")


@pytest.mark.parametrize("hot_path", [True, False], ids=["hot-path", "general-path"])
async def test_a_result_that_cannot_be_journaled_is_flagged_and_journaled_later(
    database_url: str, hot_path: bool
) -> None:
    harness = await make_harness(database_url)
    harness.store.__class__ = FlakyStore
    store = harness.store
    assert isinstance(store, FlakyStore)
    handler = harness.lifecycle.handler
    if hot_path:
        handler.settlement.fast = FlakyFastPath(store, handler.settlement.fast)
    else:
        handler.settlement.fast = None
        handler.fast_admission = None

    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        store.down = True
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

        store.down = False
        await harness.lifecycle.handler.drain()

        entries = harness.sql(
            "SELECT kind, boundary, body::jsonb->>'result' FROM journal_entries WHERE run_id = %s",
            harness.run_id,
        )
        assert entries == [("execution", "EFFECT_COMPLETED", "done while the journal was away")]
        assert harness.sql(
            "SELECT audit_incomplete FROM runs WHERE run_id = %s", harness.run_id
        ) == [(True,)]
        assert harness.sql("SELECT settled FROM intents WHERE run_id = %s", harness.run_id) == [
            (True,)
        ]
        report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
        assert report.ok
        again = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert (again.outcome, again.audit_incomplete) == ("deduplicated", True)
        assert harness.tools["write"].calls == 1
    finally:
        store.down = False
        await harness.close()


async def test_the_run_is_flagged_with_the_late_entry_not_after_it(database_url: str) -> None:
    harness = await make_harness(database_url)
    harness.store.__class__ = FlakyStore
    store = harness.store
    assert isinstance(store, FlakyStore)
    handler = harness.lifecycle.handler
    fast = FlakyFastPath(store, handler.settlement.fast)
    handler.settlement.fast = fast
    fast_down = True

    class Fast(FlakyFastPath):
        def _check(self) -> None:
            if fast_down:
                raise StoreUnavailable("the database is unreachable (test)")

    handler.settlement.fast = Fast(store, fast.inner)

    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        store.down = True
        return ToolResult.ok("done")

    harness.tools["write"].then(outage_during_dispatch)
    try:
        result = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert result.audit_incomplete is True
        # The one-statement journal path answers again, transactions do not yet.
        fast_down = False
        await asyncio.sleep(0.5)
        store.down = False
        assert await handler.drain(10.0)

        entries = harness.sql("SELECT kind FROM journal_entries WHERE run_id = %s", harness.run_id)
        assert entries == [("execution",)]
        assert harness.sql(
            "SELECT audit_incomplete FROM runs WHERE run_id = %s", harness.run_id
        ) == [(True,)]
    finally:
        store.down = False
        await harness.close()


async def test_a_held_result_that_can_never_be_journaled_is_not_retried_for_ever(
    pg_server_url: str,
) -> None:
    url = create_database(pg_server_url)
    upgrade(url)
    harness = await make_harness(url)

    async def schema_gone_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        # The journal step's function disappears (a botched migration underneath).
        harness.sql("DROP FUNCTION arvis_journal_append")
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

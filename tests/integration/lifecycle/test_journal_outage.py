"""A result whose journal commit fails is held, flagged, and journaled when the store returns."""

from __future__ import annotations

from arvis.domain.errors import StoreUnavailable
from arvis.domain.ids import RunId
from arvis.store.database import PgStore
from arvis.store.uow import PgUnitOfWork
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import AGENT, make_harness


class FlakyStore(PgStore):
    """A store whose new transactions fail while ``down`` is set."""

    down = False

    def unit_of_work(self) -> PgUnitOfWork:
        if self.down:
            raise StoreUnavailable("the database is unreachable (test)")
        return super().unit_of_work()


async def test_a_result_that_cannot_be_journaled_is_flagged_and_journaled_later(
    database_url: str,
) -> None:
    harness = await make_harness(database_url)
    harness.store.__class__ = FlakyStore
    store = harness.store
    assert isinstance(store, FlakyStore)

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
        assert harness.sql("SELECT count(*) FROM journal_entries") == [(0,)]

        store.down = False
        await harness.lifecycle.handler.drain()

        entries = harness.sql("SELECT kind, boundary, body::jsonb->>'result' FROM journal_entries")
        assert entries == [("execution", "EFFECT_COMPLETED", "done while the journal was away")]
        assert harness.sql(
            "SELECT audit_incomplete FROM runs WHERE run_id = %s", harness.run_id
        ) == [(True,)]
        assert harness.sql("SELECT settled FROM intents") == [(True,)]
        report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
        assert report.ok
        again = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert (again.outcome, again.audit_incomplete) == ("deduplicated", True)
        assert harness.tools["write"].calls == 1
    finally:
        store.down = False
        await harness.store.close()

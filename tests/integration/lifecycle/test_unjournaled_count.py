"""``Settlement.unjournaled``: what a stopping process counts to choose its exit status
(arvis.cli.instance). A held result counts until it is journaled; one that can never be
journaled counts for good, although nothing is left to wait for."""

from __future__ import annotations

from arvis.store.migrate import upgrade
from arvis.tools.base import ToolInvocation, ToolResult
from tests.integration.lifecycle.test_journal_outage import FlakyFastPath, FlakyStore
from tests.support.lifecycle import make_harness
from tests.support.postgres import create_database, drop_database


async def test_a_held_result_counts_until_it_is_journaled(database_url: str) -> None:
    harness = await make_harness(database_url)
    harness.store.__class__ = FlakyStore
    store = harness.store
    assert isinstance(store, FlakyStore)
    settlement = harness.lifecycle.handler.settlement
    settlement.fast = FlakyFastPath(store, settlement.fast)

    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        store.down = True
        return ToolResult.ok("done")

    harness.tools["write"].then(outage_during_dispatch)
    try:
        assert settlement.unjournaled == 0
        result = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert result.audit_incomplete is True
        assert settlement.unjournaled == 1
        assert not await harness.lifecycle.handler.drain(0.3)

        store.down = False
        assert await harness.lifecycle.handler.drain(10.0)
        assert settlement.unjournaled == 0
    finally:
        store.down = False
        await harness.close()


async def test_a_result_that_can_never_be_journaled_counts_after_the_drain(
    pg_server_url: str,
) -> None:
    url = create_database(pg_server_url)
    upgrade(url)
    harness = await make_harness(url)

    async def schema_gone_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        harness.sql("DROP FUNCTION arvis_journal_append")
        return ToolResult.ok("done")

    harness.tools["write"].then(schema_gone_during_dispatch)
    try:
        await harness.execute("write", {"text": "x"}, causal_id="c")
        # Nothing left to wait for: the held result gave up and was settled as interrupted.
        assert await harness.lifecycle.handler.drain(5.0)
        assert harness.lifecycle.handler.settlement.unjournaled == 1
    finally:
        await harness.close()
        drop_database(pg_server_url, url)

"""``Settlement.unjournaled``: what a stopping process counts to choose its exit status
(arvis.cli.instance). A held result counts until it is journaled; one that can never be
journaled counts for good, although nothing is left to wait for."""

from __future__ import annotations

from typing import Any

from arvis.lifecycle.ports import LifecycleStore
from arvis.store.migrate import upgrade
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.faults import FlakyStore
from tests.support.lifecycle import make_harness
from tests.support.postgres import create_database, drop_database


async def test_a_held_result_counts_until_it_is_journaled(database_url: str) -> None:
    made: list[FlakyStore] = []

    def wrap(inner: LifecycleStore) -> Any:
        made.append(FlakyStore(inner))
        return made[0]

    harness = await make_harness(database_url, wrap_store=wrap)
    store = made[0]
    settlement = harness.lifecycle.handler.settlement

    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        store.down.add("journal")
        return ToolResult.ok("done")

    harness.tools["write"].then(outage_during_dispatch)
    try:
        assert settlement.unjournaled == 0
        result = await harness.execute("write", {"text": "x"}, causal_id="c")
        assert result.audit_incomplete is True
        assert settlement.unjournaled == 1
        assert not await harness.lifecycle.handler.drain(0.3)

        store.down.clear()
        assert await harness.lifecycle.handler.drain(10.0)
        assert settlement.unjournaled == 0
    finally:
        store.down.clear()
        await harness.close()


async def test_a_result_that_can_never_be_journaled_counts_after_the_drain(
    pg_server_url: str,
) -> None:
    url = create_database(pg_server_url)
    upgrade(url)
    harness = await make_harness(url)

    async def schema_gone_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        harness.sql("DROP FUNCTION arvis_journal")
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

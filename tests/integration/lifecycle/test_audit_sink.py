"""A faulty audit sink leaves the tool body un-run and no consumed capability."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from arvis.domain.errors import ArvisError, IntegrityConflict
from arvis.lifecycle.errors import AuditSinkFailure, InvalidReceipt
from arvis.store.audit import PgAuditSink
from tests.support.lifecycle import make_harness
from tests.support.sinks import ForeignReceiptSink, RaisingSink, ReusedPositionSink


@pytest.mark.parametrize(
    ("sink", "error"),
    [(RaisingSink, AuditSinkFailure), (ForeignReceiptSink, InvalidReceipt)],
)
async def test_a_faulty_sink_aborts_admission_before_anything_runs(
    database_url: str, sink: Callable[[str], PgAuditSink], error: type[ArvisError]
) -> None:
    harness = await make_harness(database_url, audit_sink=lambda store: sink(store.fingerprint))
    try:
        with pytest.raises(error):
            await harness.execute("read", {"q": 1}, causal_id="c")
        assert harness.tools["read"].calls == 0
        assert harness.sql(
            "SELECT count(*) FROM capabilities WHERE run_id = %s", harness.run_id
        ) == [(0,)]
        assert harness.sql("SELECT count(*) FROM intents WHERE run_id = %s", harness.run_id) == [
            (0,)
        ]
    finally:
        await harness.close()


async def test_a_reused_durable_position_aborts_the_second_admission(database_url: str) -> None:
    harness = await make_harness(
        database_url, audit_sink=lambda store: ReusedPositionSink(store.fingerprint)
    )
    try:
        first = await harness.execute("read", {"q": 1})
        assert first.outcome == "executed"

        with pytest.raises(IntegrityConflict):
            await harness.execute("read", {"q": 2}, causal_id="second")

        assert harness.tools["read"].calls == 1
        assert harness.sql("SELECT state FROM capabilities WHERE run_id = %s", harness.run_id) == [
            ("CONSUMED",)
        ]
    finally:
        await harness.close()


async def test_a_store_outage_while_writing_the_intent_is_reported_as_an_outage(
    database_url: str,
) -> None:
    from arvis.domain.errors import StoreUnavailable
    from tests.support.sinks import UnreachableStoreSink

    harness = await make_harness(
        database_url, audit_sink=lambda store: UnreachableStoreSink(store.fingerprint)
    )
    try:
        with pytest.raises(StoreUnavailable):
            await harness.execute("read", {"q": 3}, causal_id="outage")
        assert harness.tools["read"].calls == 0
    finally:
        await harness.close()

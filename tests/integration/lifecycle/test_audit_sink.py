"""A declared audit sink is called for every attempt and its receipt checked before
anything is written; a faulty one leaves the tool body un-run (DESIGN §1)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from arvis.domain.errors import ArvisError, StoreUnavailable
from arvis.lifecycle.errors import AuditSinkFailure, InvalidReceipt
from tests.support.lifecycle import Harness, make_harness
from tests.support.sinks import (
    ForeignReceiptSink,
    RaisingSink,
    RecordingSink,
    ReusedPositionSink,
    UnreachableStoreSink,
)


def _nothing_admitted(harness: Harness) -> None:
    assert harness.in_flight() == []
    assert harness.sql(
        "SELECT count(*) FROM journal_entries WHERE run_id = %s", harness.run_id
    ) == [(0,)]


@pytest.mark.parametrize(
    ("sink", "error"),
    [
        (RaisingSink, AuditSinkFailure),
        (ForeignReceiptSink, InvalidReceipt),
        (UnreachableStoreSink, StoreUnavailable),
    ],
)
async def test_a_faulty_sink_aborts_admission_before_anything_runs(
    database_url: str, sink: Callable[[str], RecordingSink], error: type[ArvisError]
) -> None:
    harness = await make_harness(database_url, audit_sink=sink)
    try:
        with pytest.raises(error):
            await harness.execute("read", {"q": 1}, causal_id="c")
        assert harness.tools["read"].calls == 0
        _nothing_admitted(harness)
    finally:
        await harness.close()


async def test_a_reused_durable_position_aborts_the_second_admission(database_url: str) -> None:
    harness = await make_harness(database_url, audit_sink=ReusedPositionSink)
    try:
        first = await harness.execute("read", {"q": 1})
        assert first.outcome == "executed"

        with pytest.raises(InvalidReceipt):
            await harness.execute("read", {"q": 2}, causal_id="second")

        assert harness.tools["read"].calls == 1
        assert harness.in_flight() == []
        assert harness.sql(
            "SELECT count(*) FROM journal_entries WHERE run_id = %s AND kind = 'execution'",
            harness.run_id,
        ) == [(1,)]
    finally:
        await harness.close()


async def test_a_declared_sink_sees_every_attempt_and_its_receipt_is_the_answers(
    database_url: str,
) -> None:
    sinks: list[RecordingSink] = []

    def recording(fingerprint: str) -> RecordingSink:
        sinks.append(RecordingSink(fingerprint))
        return sinks[0]

    harness = await make_harness(database_url, audit_sink=recording)
    try:
        harness.tools["write"].then_fail(effect_started=False, retryable=True)
        first = await harness.execute("write", {"text": "x"}, causal_id="w")
        second = await harness.execute("write", {"text": "x"}, causal_id="w")
        assert [first.attempt, second.attempt] == [1, 2]
        recorded = sinks[0].recorded
        assert [(i.context.causal_id, i.attempt) for i in recorded] == [("w", 1), ("w", 2)]
        assert second.receipt is not None
        assert second.receipt.intent_commitment == recorded[1].commitment
    finally:
        await harness.close()

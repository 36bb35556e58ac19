"""The witness's account of the tail, without a database (issue 23): which intents the
cross-check may leave unsettled, the feed that hands appended entries to the witness in
batches, and reading one run's records back from a file witness."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from arvis.domain.ids import RunId, TenantId
from arvis.domain.intent import GENESIS_HASH
from arvis.evidence.witness import FileWitness, run_records
from arvis.lifecycle.evidence.crosscheck import WITNESS_GRACE_S, ChainFacts, cross_check
from arvis.lifecycle.evidence.witnessing import WitnessFeed
from arvis.lifecycle.records import JournalEntry

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _entry(position: int, run: str = "run-1") -> JournalEntry:
    return JournalEntry(
        tenant_id=TenantId("acme"),
        run_id=RunId(run),
        position=position,
        kind="execution",
        causal_id=f"c{position}",
        idempotency_key="k" * 64,
        attempt=1,
        intent_id=f"int-{position}",
        boundary="EFFECT_COMPLETED",
        body_text="{}",
        prev_hash=GENESIS_HASH,
        entry_hash=f"{position:064d}",
        recorded_at=NOW,
    )


def _intent(intent_id: str, admitted: datetime) -> dict[str, Any]:
    return {
        "type": "intent",
        "tenant_id": "acme",
        "run_id": "run-1",
        "intent_id": intent_id,
        "intent_commitment": "c" * 64,
        "admitted_at": admitted.isoformat(),
    }


def _facts() -> ChainFacts:
    facts = ChainFacts()
    facts.hashes[1] = "1" * 64
    facts.settled["int-settled"] = 1
    return facts


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("settled", False),
        ("in flight", False),
        ("admitted a moment ago", False),
        ("not admitted", False),
        ("lost", True),
    ],
)
def test_a_witnessed_intent_no_entry_settles_is_named_only_once_it_cannot_be_in_flight(
    case: str, named: bool
) -> None:
    old = NOW - timedelta(seconds=WITNESS_GRACE_S + 1)
    intent_id = {"settled": "int-settled", "in flight": "int-flying"}.get(case, "int-x")
    records = [_intent(intent_id, NOW - timedelta(seconds=1) if "moment" in case else old)]
    if case == "not admitted":
        records.append(
            {"type": "intent_void", "tenant_id": "acme", "run_id": "run-1", "intent_id": "int-x"}
        )
    found = cross_check(
        records, "acme", "run-1", _facts(), [], None, length=1, in_flight={"int-flying"}, now=NOW
    )
    if named:
        assert found is not None
        assert found[0] == 2
        assert "intent int-x" in found[1]
        assert "which no entry settles" in found[1]
    else:
        assert found is None


def test_an_intent_witnessed_again_after_a_void_is_looked_for_again() -> None:
    old = NOW - timedelta(seconds=WITNESS_GRACE_S + 1)
    records = [
        _intent("int-x", old),
        {"type": "intent_void", "tenant_id": "acme", "run_id": "run-1", "intent_id": "int-x"},
        _intent("int-x", old),
    ]
    found = cross_check(
        records, "acme", "run-1", _facts(), [], None, length=1, in_flight=set(), now=NOW
    )
    assert found is not None
    assert "intent int-x" in found[1]


class _SlowWitness:
    """Takes each batch after ``gate`` opens; records the batches; fails when told."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.failures = 0

    async def witness_entries(self, entries: Sequence[JournalEntry]) -> None:
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError("the disk is full")
        self.batches.append([e.position for e in entries])


def test_entries_noted_while_a_write_is_in_flight_go_in_one_batch_in_order() -> None:
    async def scenario() -> tuple[list[list[int]], int, int]:
        witness = _SlowWitness()
        feed = WitnessFeed(witness)
        feed.note(_entry(1))
        await asyncio.sleep(0)  # the first write starts, and waits on the gate
        for position in range(2, 6):
            feed.note(_entry(position))
        witness.gate.set()
        assert await feed.drain(5.0)
        return witness.batches, feed.witnessed, feed.pending

    batches, witnessed, pending = asyncio.run(scenario())
    assert batches == [[1], [2, 3, 4, 5]]
    assert (witnessed, pending) == (5, 0)


def test_a_witness_that_fails_is_retried_and_loses_nothing() -> None:
    async def scenario() -> tuple[list[list[int]], int]:
        witness = _SlowWitness()
        witness.failures = 2
        witness.gate.set()
        feed = WitnessFeed(witness)
        feed.note(_entry(1))
        feed.note(_entry(2))
        assert await feed.drain(5.0)
        return witness.batches, feed.failures

    batches, failures = asyncio.run(scenario())
    assert batches == [[1, 2]]
    assert failures == 2


def test_a_run_s_records_are_read_back_and_no_other_run_s(tmp_path: Path) -> None:
    path = tmp_path / "witness.jsonl"
    witness = FileWitness(path, max_bytes=4096)

    async def write() -> None:
        for position in range(1, 40):
            await witness.witness_entries([_entry(position, "run-1"), _entry(position, "run-10")])

    asyncio.run(write())
    found = run_records(path, "acme", "run-1")
    assert [r["position"] for r in found] == list(range(1, 40))
    assert {r["run_id"] for r in found} == {"run-1"}
    assert run_records(path, "globex", "run-1") == []


def test_a_receipt_bearing_body_that_is_not_json_is_named_not_a_crash() -> None:
    facts = ChainFacts()
    row = (1, GENESIS_HASH, "1" * 64, "execution", "c1", "k" * 64, 1, "int-1",
           "EFFECT_COMPLETED", NOW, '"receipt" but no JSON')  # fmt: skip
    facts.visit(row)
    assert facts.unfaithful == (1, "entry altered: its body is not a JSON object")


@pytest.mark.parametrize("principal", ["agent-7", "agenté", 'quote" and \\ and \n'])
def test_a_commitment_s_canonical_text_is_rfc_8785(principal: str) -> None:
    import rfc8785

    from arvis.domain.canonical import canonical_flat

    fields: dict[str, str | int] = {"principal_id": principal, "attempt": 3, "tool": "echo"}
    assert canonical_flat(fields) == rfc8785.dumps(fields)

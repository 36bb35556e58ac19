"""Replay and verification on the in-memory store: recorded results in causal order,
nothing run; the chain recomputed, a tampered entry named at its position."""

from __future__ import annotations

import dataclasses

import pytest

from arvis.domain.ids import RunId
from arvis.lifecycle.errors import ChainBroken
from tests.support.fakelifecycle import FakeHarness
from tests.support.fakestore.tables import StoredEntry
from tests.support.lifecycle import AGENT


async def _three_decisions(harness: FakeHarness) -> None:
    await harness.execute("read", {"n": 1}, causal_id="first")
    await harness.execute("teleport", {}, causal_id="second")
    await harness.execute("write", {"text": "third"}, causal_id="third")
    await harness.execute("read", {"n": 1}, causal_id="first")  # deduplicated, not journaled


async def test_replay_returns_recorded_results_in_causal_order_and_runs_nothing(
    harness: FakeHarness,
) -> None:
    await _three_decisions(harness)
    calls = {name: tool.calls for name, tool in harness.tools.items()}
    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))
    assert [(r.causal_id, r.outcome) for r in replayed] == [
        ("first", "executed"),
        ("second", "refused"),
        ("third", "executed"),
    ]
    assert replayed[0].result == {"echo": {"n": 1}}
    assert {name: tool.calls for name, tool in harness.tools.items()} == calls
    assert len(harness.entries()) == 3


async def test_replay_shows_the_latest_attempt_of_a_retried_decision(
    harness: FakeHarness,
) -> None:
    harness.tools["write"].then_fail(effect_started=False, retryable=False)
    await harness.execute("write", {"text": "x"}, causal_id="c")
    await harness.execute("write", {"text": "x"}, causal_id="c")
    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))
    assert [(r.causal_id, r.attempt, r.boundary) for r in replayed] == [
        ("c", 2, "EFFECT_COMPLETED")
    ]


def _tamper(harness: FakeHarness, position: int) -> None:
    where = (AGENT.tenant_id, harness.run_id, position)
    stored = harness.store.tables.entries[where]
    forged = dataclasses.replace(stored.entry, body_text=stored.entry.body_text.replace("1", "2"))
    harness.store.tables.entries[where] = StoredEntry(forged, stored.retryable)


async def test_an_untouched_chain_verifies_and_a_tampered_entry_is_named(
    harness: FakeHarness,
) -> None:
    await _three_decisions(harness)
    replay = harness.lifecycle.replay
    report = await replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.entries, report.broken_at) == (True, 3, None)
    _tamper(harness, 1)
    report = await replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 1)
    with pytest.raises(ChainBroken):
        await replay.replay(AGENT.tenant_id, RunId(harness.run_id))

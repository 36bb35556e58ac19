"""Replay reads; verification recomputes the chain and names where it breaks."""

from __future__ import annotations

from arvis.domain.ids import RunId
from tests.support.lifecycle import AGENT, Harness


async def _three_decisions(harness: Harness) -> None:
    await harness.execute("read", {"n": 1}, causal_id="first")
    await harness.execute("teleport", {}, causal_id="second")
    await harness.execute("write", {"text": "third"}, causal_id="third")
    await harness.execute("read", {"n": 1}, causal_id="first")  # deduplicated, not journaled


async def test_replay_returns_recorded_results_in_causal_order_and_runs_nothing(
    harness: Harness,
) -> None:
    await _three_decisions(harness)
    calls = {name: tool.calls for name, tool in harness.tools.items()}
    capabilities = harness.sql("SELECT capability_id, state FROM capabilities ORDER BY 1")

    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))

    assert [r.causal_id for r in replayed] == ["first", "second", "third"]
    assert [r.outcome for r in replayed] == ["executed", "refused", "executed"]
    assert replayed[0].result == {"echo": {"n": 1}}
    assert replayed[1].reason == "unknown_tool"
    assert {name: tool.calls for name, tool in harness.tools.items()} == calls
    assert harness.sql("SELECT capability_id, state FROM capabilities ORDER BY 1") == capabilities


async def test_replay_shows_the_latest_attempt_of_a_retried_decision(harness: Harness) -> None:
    harness.tools["write"].then_fail(effect_started=False, retryable=False)
    await harness.execute("write", {"text": "x"}, causal_id="c")
    await harness.execute("write", {"text": "x"}, causal_id="c")

    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))

    assert [(r.causal_id, r.attempt, r.boundary) for r in replayed] == [
        ("c", 2, "EFFECT_COMPLETED")
    ]


async def test_an_untouched_chain_verifies(harness: Harness) -> None:
    await _three_decisions(harness)
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.entries, report.broken_at) == (True, 3, None)


async def test_a_tampered_journal_row_is_detected_at_its_exact_position(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql(
        "UPDATE journal_entries SET body = jsonb_set(body::jsonb, '{result}', '\"forged\"')::text "
        "WHERE run_id = %s AND position = 2",
        harness.run_id,
    )
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at, report.entries) == (False, 2, 1)


async def test_a_re_hashed_forgery_breaks_the_next_link(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql(
        "UPDATE journal_entries SET entry_hash = repeat('a', 64) "
        "WHERE run_id = %s AND position = 1",
        harness.run_id,
    )
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 1)


async def test_a_deleted_last_entry_is_detected(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 3", harness.run_id)
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 3)


async def test_a_deleted_middle_entry_is_detected(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 2", harness.run_id)
    report = await harness.lifecycle.replay.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 2)

"""Replay reads; verification recomputes the chain and names where it breaks."""

from __future__ import annotations

import pytest

from arvis.domain.ids import RunId
from arvis.lifecycle.errors import ChainBroken
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
    before = harness.sql("SELECT count(*) FROM journal_entries")

    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))

    assert [r.causal_id for r in replayed] == ["first", "second", "third"]
    assert [r.outcome for r in replayed] == ["executed", "refused", "executed"]
    assert replayed[0].result == {"echo": {"n": 1}}
    assert replayed[1].reason == "unknown_tool"
    assert {name: tool.calls for name, tool in harness.tools.items()} == calls
    assert harness.sql("SELECT count(*) FROM journal_entries") == before
    assert harness.in_flight() == []


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
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.entries, report.broken_at) == (True, 3, None)


async def test_a_tampered_journal_row_is_detected_at_its_exact_position(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql(
        "UPDATE journal_entries SET body = jsonb_set(body::jsonb, '{result}', '\"forged\"')::text "
        "WHERE run_id = %s AND position = 2",
        harness.run_id,
    )
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at, report.entries) == (False, 2, 1)


async def test_a_re_hashed_forgery_breaks_the_next_link(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql(
        "UPDATE journal_entries SET entry_hash = repeat('a', 64) "
        "WHERE run_id = %s AND position = 1",
        harness.run_id,
    )
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 1)


async def test_a_deleted_last_entry_is_detected(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 3", harness.run_id)
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 3)


async def test_a_deleted_middle_entry_is_detected(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 2", harness.run_id)
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert (report.ok, report.broken_at) == (False, 2)


async def test_replay_refuses_a_tampered_chain_naming_the_position(harness: Harness) -> None:
    await _three_decisions(harness)
    harness.sql(
        "UPDATE journal_entries SET body = jsonb_set(body::jsonb, '{result}', '\"forged\"')::text "
        "WHERE run_id = %s AND position = 1",
        harness.run_id,
    )

    with pytest.raises(ChainBroken) as broken:
        await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))
    assert broken.value.broken_at == 1
    with pytest.raises(ChainBroken):
        await harness.lifecycle.replay.replay_page(AGENT.tenant_id, RunId(harness.run_id))


async def test_replay_refuses_a_chain_truncated_after_the_page_it_returns(
    harness: Harness,
) -> None:
    await _three_decisions(harness)
    harness.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 3", harness.run_id)

    # The first page would not even include position 3: the whole chain is checked anyway.
    with pytest.raises(ChainBroken) as broken:
        await harness.lifecycle.replay.replay_page(AGENT.tenant_id, RunId(harness.run_id), limit=1)
    assert broken.value.broken_at == 3


async def test_replay_pages_by_causal_id_in_first_seen_order(harness: Harness) -> None:
    for n in range(5):
        await harness.execute("read", {"n": n}, causal_id=f"c{n}")
    harness.tools["write"].then_fail(effect_started=False, retryable=False)
    await harness.execute("write", {"text": "w"}, causal_id="c1w")
    await harness.execute("write", {"text": "w"}, causal_id="c1w")  # attempt 2 completes

    pages: list[list[tuple[str, int | None]]] = []
    after = 0
    while True:
        page = await harness.lifecycle.replay.replay_page(
            AGENT.tenant_id, RunId(harness.run_id), after, limit=2
        )
        pages.append([(r.causal_id, r.attempt) for r in page.results])
        if page.next_after is None:
            break
        after = page.next_after

    assert pages == [[("c0", 1), ("c1", 1)], [("c2", 1), ("c3", 1)], [("c4", 1), ("c1w", 2)]]
    everything = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))
    assert [(r.causal_id, r.attempt) for r in everything] == [p for page in pages for p in page]


async def test_replay_keeps_the_decision_a_causal_id_names_after_a_conflicting_post(
    harness: Harness,
) -> None:
    ran = await harness.execute("read", {"n": 1}, causal_id="c")
    other = await harness.execute("read", {"n": 2}, causal_id="c")
    assert other.reason == "causal_id_conflict"

    replayed = await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))

    assert [(r.causal_id, r.outcome, r.result) for r in replayed] == [("c", "executed", ran.result)]

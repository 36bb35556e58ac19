"""One syscall through the whole lifecycle: admitted, run once, journaled."""

from __future__ import annotations

from arvis.domain.boundary import EffectBoundary
from tests.support.lifecycle import Harness


async def test_a_read_only_call_runs_once_and_is_journaled_with_its_receipt(
    harness: Harness,
) -> None:
    result = await harness.execute("read", {"q": "hello"})

    assert result.outcome == "executed"
    assert result.boundary is EffectBoundary.EFFECT_COMPLETED
    assert result.result == {"echo": {"q": "hello"}}
    assert result.attempt == 1
    assert result.journal_position == 1
    assert result.receipt is not None
    assert result.receipt.store_fingerprint == harness.store.fingerprint
    assert harness.tools["read"].calls == 1
    assert harness.capability_states(result.idempotency_key) == ["CONSUMED"]
    # Settled: no attempt left in flight, and the entry records the receipt's commitment.
    assert harness.in_flight() == []
    settled = harness.sql(
        "SELECT boundary, body::jsonb -> 'receipt' ->> 'intent_commitment' FROM journal_entries"
        " WHERE idempotency_key = %s",
        result.idempotency_key,
    )
    assert settled == [("EFFECT_COMPLETED", result.receipt.intent_commitment)]


async def test_the_tool_receives_the_frozen_payload_not_the_callers_object(
    harness: Harness,
) -> None:
    payload = {"b": 1, "a": [1, 2]}
    await harness.execute("read", payload)
    payload["b"] = 2
    assert harness.tools["read"].seen == [{"a": [1, 2], "b": 1}]


async def test_the_idempotency_key_is_the_same_for_the_same_logical_action(
    harness: Harness,
) -> None:
    first = await harness.execute("read", {"x": 1, "y": 2}, causal_id="same")
    again = await harness.execute("read", {"y": 2, "x": 1}, causal_id="same")
    assert again.idempotency_key == first.idempotency_key
    assert len(first.idempotency_key) == 64

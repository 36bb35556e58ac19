"""Resolving uncertain outcomes (issue 16), through the SyscallHandler on PostgreSQL: the
resolution entry, what the retry table does after it, replay and verify, four eyes, the
attacks (twice, not uncertain, another tenant), and reconcile hooks asked by the sweeper."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import Identity
from arvis.domain.ids import RunId
from arvis.domain.journal import ResolutionArtifact
from arvis.lifecycle.errors import AlreadyResolved, NotFound, NotUncertain, SelfResolution
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.records import JournalEntry
from arvis.tools.base import Reconciliation, ToolInvocation
from tests.support.lifecycle import (
    AGENT,
    APPROVER,
    Harness,
    crash_during_dispatch,
    make_harness,
    standard_tools,
)
from tests.support.operators import FOREIGN_LEAD, LEAD_A, ReconcilingTool, approver, due_now

B = EffectBoundary
PAYLOAD = {"to": "acct-9", "cents": 500}


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    tools = {**standard_tools(), "ledger.move": ReconcilingTool()}
    # No consent in the way: these tests are about what happened, not who allowed it.
    policy = PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))
    built = await make_harness(database_url, tools=tools, policy=policy)
    try:
        yield built
    finally:
        await built.close()


async def _uncertain(harness: Harness, tool: str = "append", causal_id: str = "c-1") -> str:
    key = await crash_during_dispatch(harness, tool, PAYLOAD, causal_id=causal_id)
    await harness.lifecycle.sweeper.sweep()
    return key


async def _resolve(
    harness: Harness, key: str, boundary: B, who: Identity = APPROVER
) -> JournalEntry:
    return await harness.lifecycle.resolutions.resolve(
        who, RunId(harness.run_id), key, 1, boundary, "checked the ledger: line 42"
    )


async def test_a_resolved_not_started_attempt_runs_afresh_and_the_tool_runs_once_more(
    harness: Harness,
) -> None:
    key = await _uncertain(harness)
    refused = await harness.execute("append", PAYLOAD, causal_id="c-1")
    assert refused.reason == "retry_prohibited_uncertain"
    runs_before = harness.tools["append"].calls

    await _resolve(harness, key, B.EFFECT_NOT_STARTED)
    again = await harness.execute("append", PAYLOAD, causal_id="c-1")

    assert again.outcome == "executed"
    assert again.boundary is B.EFFECT_COMPLETED
    assert again.attempt == 2
    assert harness.tools["append"].calls == runs_before + 1


async def test_a_resolved_completed_attempt_is_answered_deduplicated_with_its_resolution(
    harness: Harness,
) -> None:
    key = await _uncertain(harness)
    resolution = await _resolve(harness, key, B.EFFECT_COMPLETED)
    runs_before = harness.tools["append"].calls

    answer = await harness.execute("append", PAYLOAD, causal_id="c-1")

    assert answer.outcome == "deduplicated"
    assert answer.boundary is B.EFFECT_STATE_UNKNOWN  # the record is never changed
    assert answer.resolution is not None
    assert answer.resolution.boundary is B.EFFECT_COMPLETED
    assert answer.resolution.position == resolution.position
    assert answer.resolution.resolved_by == APPROVER.principal_id
    assert harness.tools["append"].calls == runs_before


async def test_a_resolved_failed_attempt_is_refused_without_retry_advice(harness: Harness) -> None:
    key = await _uncertain(harness)
    await _resolve(harness, key, B.EFFECT_FAILED)
    answer = await harness.execute("append", PAYLOAD, causal_id="c-1")
    assert answer.outcome == "refused"
    assert answer.reason == "retry_not_advised"


async def test_the_resolution_is_a_chain_entry_beside_the_untouched_uncertain_entry(
    harness: Harness,
) -> None:
    key = await _uncertain(harness)
    before = harness.sql(
        "SELECT position, entry_hash, body FROM journal_entries WHERE idempotency_key = %s",
        key,
    )
    entry = await _resolve(harness, key, B.EFFECT_COMPLETED)

    after = harness.sql(
        "SELECT position, entry_hash, body FROM journal_entries WHERE idempotency_key = %s"
        " AND kind <> 'resolution'",
        key,
    )
    assert after == before
    artifact = entry.artifact
    assert isinstance(artifact, ResolutionArtifact)
    assert artifact.resolves.position == before[0][0]
    assert artifact.resolves.entry_hash == before[0][1]
    assert artifact.resolved_by.principal_id == APPROVER.principal_id
    assert artifact.resolved_by.key_id == APPROVER.key_id
    assert artifact.evidence == "checked the ledger: line 42"
    assert artifact.requested_by == AGENT.principal_id
    replay = harness.lifecycle.replay
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok
    [result] = await replay.replay(AGENT.tenant_id, RunId(harness.run_id))
    assert result.boundary is B.EFFECT_STATE_UNKNOWN
    assert result.resolution is not None
    assert result.resolution.position == entry.position


async def test_verify_names_a_resolution_whose_uncertain_entry_was_swapped(
    harness: Harness,
) -> None:
    key = await _uncertain(harness)
    entry = await _resolve(harness, key, B.EFFECT_COMPLETED)
    # Point the resolution at another position: its own hash is recomputed so only the
    # reference is wrong (an editor with database access and the hash function).
    body = entry.body_text.replace('"position":1', '"position":7')
    harness.sql(
        "UPDATE journal_entries SET body = %s WHERE run_id = %s AND position = %s",
        body,
        harness.run_id,
        entry.position,
    )
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert not report.ok
    assert report.broken_at == entry.position


async def test_resolving_twice_is_refused_and_the_first_resolution_stands(harness: Harness) -> None:
    key = await _uncertain(harness)
    await _resolve(harness, key, B.EFFECT_NOT_STARTED)
    with pytest.raises(AlreadyResolved):
        await _resolve(harness, key, B.EFFECT_COMPLETED, who=LEAD_A)
    kinds = harness.sql(
        "SELECT count(*) FROM journal_entries WHERE kind = 'resolution' AND idempotency_key = %s",
        key,
    )
    assert kinds == [(1,)]


async def test_an_attempt_whose_outcome_is_known_cannot_be_resolved(harness: Harness) -> None:
    done = await harness.execute("append", PAYLOAD, causal_id="c-known")
    assert done.boundary is B.EFFECT_COMPLETED
    with pytest.raises(NotUncertain):
        await _resolve(harness, done.idempotency_key, B.EFFECT_NOT_STARTED)


async def test_another_tenants_attempt_and_an_unknown_attempt_are_not_found(
    harness: Harness,
) -> None:
    key = await _uncertain(harness)
    with pytest.raises(NotFound):
        await _resolve(harness, key, B.EFFECT_NOT_STARTED, who=FOREIGN_LEAD)
    with pytest.raises(NotFound):
        await harness.lifecycle.resolutions.resolve(
            APPROVER, RunId(harness.run_id), key, 9, B.EFFECT_NOT_STARTED, "no such attempt"
        )
    assert harness.sql(
        "SELECT count(*) FROM journal_entries WHERE kind = 'resolution' AND idempotency_key = %s",
        key,
    ) == [(0,)]


async def test_the_principal_whose_call_it_was_cannot_resolve_it(harness: Harness) -> None:
    key = await _uncertain(harness)
    own = approver(AGENT.principal_id)
    with pytest.raises(SelfResolution):
        await _resolve(harness, key, B.EFFECT_NOT_STARTED, who=own)


# -- reconcile hooks ---------------------------------------------------------------------


async def test_the_sweeper_asks_the_hook_and_journals_its_answer_as_the_reconciler(
    harness: Harness,
) -> None:
    tool = harness.tools["ledger.move"]
    assert isinstance(tool, ReconcilingTool)

    async def completed(invocation: ToolInvocation) -> Reconciliation:
        return Reconciliation(outcome="completed", evidence="ledger says moved")

    tool.answer = completed
    key = await _uncertain(harness, "ledger.move")

    # Open attempts of earlier tests in this database are asked too: find ours.
    [asked] = [one for one in tool.asked if one.idempotency_key == key]
    assert asked.payload.value == PAYLOAD
    assert asked.context.principal_id == AGENT.principal_id
    resolved = harness.sql(
        "SELECT boundary, resolved_by FROM resolutions WHERE idempotency_key = %s", key
    )
    assert resolved == [("EFFECT_COMPLETED", "reconciler:ledger.move (reconciler:-)")]
    answer = await harness.execute("ledger.move", PAYLOAD, causal_id="c-1")
    assert answer.outcome == "deduplicated"
    assert answer.resolution is not None
    assert answer.resolution.resolved_by == "reconciler:ledger.move"


async def test_a_hook_that_says_unknown_or_fails_changes_nothing_and_is_asked_with_backoff(
    harness: Harness,
) -> None:
    tool = harness.tools["ledger.move"]
    assert isinstance(tool, ReconcilingTool)

    async def broken(invocation: ToolInvocation) -> str:
        raise RuntimeError("the ledger is down")

    key = await _uncertain(harness, "ledger.move")  # first ask: unknown
    tool.answer = broken
    assert _asks(tool, key) == 1
    await harness.lifecycle.sweeper.sweep()  # not due yet: backoff
    assert _asks(tool, key) == 1
    due_now(harness)
    await harness.lifecycle.sweeper.sweep()
    assert _asks(tool, key) == 2

    assert harness.sql(
        "SELECT boundary, asks FROM resolutions WHERE idempotency_key = %s", key
    ) == [(None, 2)]
    refused = await harness.execute("ledger.move", PAYLOAD, causal_id="c-1")
    assert refused.reason == "retry_prohibited_uncertain"


async def test_the_hook_is_asked_no_more_than_the_configured_number_of_times(
    harness: Harness,
) -> None:
    tool = harness.tools["ledger.move"]
    assert isinstance(tool, ReconcilingTool)
    limit = harness.lifecycle.reconciler.settings.max_asks
    key = await _uncertain(harness, "ledger.move")
    for _ in range(limit + 2):
        due_now(harness)
        await harness.lifecycle.sweeper.sweep()
    assert _asks(tool, key) == limit


def _asks(tool: ReconcilingTool, key: str) -> int:
    return sum(1 for one in tool.asked if one.idempotency_key == key)


async def test_a_resolution_entry_is_observed_like_every_append(harness: Harness) -> None:
    # The checkpointer signs every N-th head by observing appends; an entry no observer
    # hears of could leave a run's head unsigned past N.
    seen: list[tuple[str, int]] = []
    harness.store.ops.append_observers.append(lambda e: seen.append((e.kind, e.position)))
    key = await _uncertain(harness)
    resolved = await _resolve(harness, key, B.EFFECT_COMPLETED)
    assert seen[-1] == ("resolution", resolved.position)
    assert [position for _, position in seen] == list(range(1, resolved.position + 1))

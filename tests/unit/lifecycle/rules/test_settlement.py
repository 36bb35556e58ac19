"""Settlement (DESIGN §2 step 3) on the in-memory store: a result the journal cannot take
is held, the run flagged, and journaled once the store answers; a retried append whose
first answer was lost is recognised as its own."""

from __future__ import annotations

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.lifecycle.runs import RunQuery
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.fakelifecycle import FakeHarness
from tests.support.lifecycle import AGENT


async def test_a_result_that_cannot_be_journaled_is_held_flagged_and_journaled_later(
    harness: FakeHarness,
) -> None:
    async def outage_during_dispatch(invocation: ToolInvocation) -> ToolResult:
        harness.store.outage = True
        return ToolResult.ok("done while the journal was away")

    harness.tools["write"].then(outage_during_dispatch)
    result = await harness.execute("write", {"text": "x"}, causal_id="c")

    assert (result.outcome, result.audit_incomplete) == ("executed", True)
    assert result.result == "done while the journal was away"
    assert result.journal_position is None
    assert harness.entries() == []
    assert harness.in_flight() == ["c"]

    harness.store.outage = False
    assert await harness.handler.drain(10.0)

    [entry] = harness.entries()
    assert (entry.kind, entry.boundary) == ("execution", "EFFECT_COMPLETED")
    assert entry.body["result"] == "done while the journal was away"
    run = harness.store.tables.runs[(AGENT.tenant_id, harness.run_id)]
    assert run.audit_incomplete
    assert run.audit_incomplete_reason is not None
    assert "journaled late" in run.audit_incomplete_reason
    assert harness.in_flight() == []
    report = await harness.lifecycle.evidence.verify(AGENT.tenant_id, RunId(harness.run_id))
    assert report.ok
    again = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (again.outcome, again.audit_incomplete) == ("deduplicated", True)
    assert harness.tools["write"].calls == 1


async def test_a_journal_answer_lost_after_commit_is_recognised_on_the_retry(
    harness: FakeHarness,
) -> None:
    harness.store.lose_answer("journal")
    result = await harness.execute("write", {"text": "x"}, causal_id="c")
    # The retried append found its own entry ('existing'): one entry, nothing held.
    assert (result.outcome, result.audit_incomplete) == ("executed", False)
    assert result.journal_position == 1
    assert len(harness.entries()) == 1
    assert harness.handler.settlement.unjournaled == 0


async def test_a_not_started_failure_may_run_again_as_the_next_attempt(
    harness: FakeHarness,
) -> None:
    harness.tools["write"].then_fail(effect_started=False, retryable=False)
    first = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_NOT_STARTED
    second = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (second.boundary, second.attempt) == (EffectBoundary.EFFECT_COMPLETED, 2)


async def test_an_unknown_outcome_is_left_open_for_a_resolution(harness: FakeHarness) -> None:
    harness.tools["write"].then_fail(effect_started=None, retryable=False)
    uncertain = await harness.execute("write", {"text": "z"}, causal_id="u")
    assert uncertain.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    page = await harness.lifecycle.replay.runs(AGENT.tenant_id, RunQuery(limit=10))
    assert [(r.run_id, r.uncertain, r.status) for r in page.runs] == [
        (harness.run_id, 1, "uncertain")
    ]

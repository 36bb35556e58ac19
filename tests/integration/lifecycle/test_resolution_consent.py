"""Settling an uncertain outcome meets the consent terms (issue 23, DESIGN §10), through
the SyscallHandler on PostgreSQL: a resolution as not started of an attempt that used its
consent up opens the consent's next round of approval, in which the resolver counts as
an approver only where they could have approved, and a reconcile hook never does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from arvis.domain.authorization import ApprovalTerms
from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, RunId
from arvis.domain.journal import ResolutionArtifact
from arvis.lifecycle.errors import AlreadyApproved, ApproverNotInGroup
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.ports import (
    ConfirmationRecord,
    JournalEntry,
    LifecycleStore,
    Resolution,
    ResolveAnswer,
)
from arvis.tools.base import Reconciliation, ToolInvocation
from tests.support.lifecycle import (
    AGENT,
    Harness,
    ScriptedTool,
    make_harness,
    standard_tools,
    tool_definition,
)
from tests.support.operators import LEAD_A, LEAD_B, OUTSIDER, ReconcilingTool, approver, due_now

B = EffectBoundary
PAYLOAD = {"to": "acct-9", "cents": 500}
QUORUM_2 = ApprovalTerms(approvers=("payments-leads",), quorum=2, ttl_s=600)
QUORUM_1 = ApprovalTerms(approvers=("payments-leads",), quorum=1, ttl_s=600)
POLICY = PolicyConfig(
    version="v1",
    default=TenantRules(
        approvals={
            "append": QUORUM_2,
            "pay": QUORUM_1,
            "ledger.move": QUORUM_1,
            "note": QUORUM_1,
        }
    ),
)


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    tools = {
        **standard_tools(),
        "ledger.move": ReconcilingTool(),
        "pay": ScriptedTool(tool_definition("pay", replay_safety=ReplaySafety.UNSAFE)),
        "note": ScriptedTool(tool_definition("note", replay_safety=ReplaySafety.IDEMPOTENT)),
    }
    built = await make_harness(database_url, tools=tools, policy=POLICY)
    try:
        yield built
    finally:
        await built.close()


async def _consented_then_uncertain(
    harness: Harness, tool: str, *approvers: Identity, causal_id: str = "c-1"
) -> tuple[ConfirmationId, str]:
    """Ask, approve with ``approvers``, run: the tool loses track of its effect."""
    asked = await harness.execute(tool, PAYLOAD, causal_id=causal_id)
    assert asked.outcome == "confirmation_required"
    assert asked.confirmation is not None
    cid = ConfirmationId(asked.confirmation.id)
    for one in approvers:
        await harness.lifecycle.manager.approve(one, cid)
    harness.tools[tool].then_fail(effect_started=None, retryable=False)
    ran = await harness.execute(tool, PAYLOAD, causal_id=causal_id)
    assert ran.boundary is B.EFFECT_STATE_UNKNOWN
    assert harness.confirmation_state(cid) == "CONSUMED"
    return cid, ran.idempotency_key


async def _resolve(
    harness: Harness, key: str, who: Identity, boundary: B = B.EFFECT_NOT_STARTED
) -> JournalEntry:
    return await harness.lifecycle.resolutions.resolve(
        who, RunId(harness.run_id), key, 1, boundary, "the far side has no such request"
    )


async def _consent(harness: Harness, cid: ConfirmationId) -> ConfirmationRecord:
    return await harness.lifecycle.manager.confirmation(AGENT.tenant_id, cid)


async def test_an_outsiders_not_started_opens_a_round_that_needs_the_whole_quorum(
    harness: Harness,
) -> None:
    cid, key = await _consented_then_uncertain(harness, "append", LEAD_A, LEAD_B)
    runs = harness.tools["append"].calls

    entry = await _resolve(harness, key, OUTSIDER)

    artifact = entry.artifact
    assert isinstance(artifact, ResolutionArtifact)
    assert artifact.consent is not None
    assert (artifact.consent.round, artifact.consent.state, artifact.consent.approvals) == (
        2,
        "PENDING",
        0,
    )
    consent = await _consent(harness, cid)
    assert (consent.state, consent.round, consent.approvals) == ("PENDING", 2, ())
    waiting = await harness.execute("append", PAYLOAD, causal_id="c-1")
    assert waiting.outcome == "confirmation_required"
    assert harness.tools["append"].calls == runs
    with pytest.raises(ApproverNotInGroup):
        await harness.lifecycle.manager.approve(OUTSIDER, cid)


async def test_a_lead_who_resolves_counts_as_one_approval_of_the_new_round(
    harness: Harness,
) -> None:
    cid, key = await _consented_then_uncertain(harness, "append", LEAD_A, LEAD_B)
    runs = harness.tools["append"].calls

    await _resolve(harness, key, LEAD_A)

    consent = await _consent(harness, cid)
    assert (consent.state, consent.round) == ("PENDING", 2)
    assert [a.principal_id for a in consent.approvals] == ["lead-a"]
    with pytest.raises(AlreadyApproved):
        await harness.lifecycle.manager.approve(LEAD_A, cid)
    assert (await harness.execute("append", PAYLOAD, causal_id="c-1")).outcome == (
        "confirmation_required"
    )
    approved = await harness.lifecycle.manager.approve(LEAD_B, cid)
    assert approved.state == "APPROVED"
    ran = await harness.execute("append", PAYLOAD, causal_id="c-1")
    assert (ran.outcome, ran.attempt) == ("executed", 2)
    assert harness.tools["append"].calls == runs + 1
    # Every round's approvals are on record; the journal names the round of each.
    assert harness.sql(
        "SELECT round, principal_id FROM confirmation_approvals WHERE confirmation_id = %s"
        " ORDER BY round, position",
        cid,
    ) == [(1, "lead-a"), (1, "lead-b"), (2, "lead-a"), (2, "lead-b")]
    assert harness.sql(
        "SELECT body::jsonb ->> 'round' FROM journal_entries WHERE kind = 'confirmation'"
        " AND idempotency_key = %s ORDER BY position",
        key,
    ) == [(None,), (None,), ("2",)]


async def test_with_a_quorum_of_one_a_resolver_who_could_approve_leaves_it_approved(
    harness: Harness,
) -> None:
    cid, key = await _consented_then_uncertain(harness, "pay", LEAD_A)
    runs = harness.tools["pay"].calls

    await _resolve(harness, key, LEAD_B)

    consent = await _consent(harness, cid)
    assert (consent.state, consent.round, consent.decided_by) == (
        "APPROVED",
        2,
        "lead-b (api_key:k_lead-b)",
    )
    ran = await harness.execute("pay", PAYLOAD, causal_id="c-1")
    assert (ran.outcome, ran.attempt) == ("executed", 2)
    assert harness.tools["pay"].calls == runs + 1
    assert harness.confirmation_state(cid) == "CONSUMED"
    again = await harness.execute("pay", PAYLOAD, causal_id="c-1")
    assert again.outcome == "deduplicated"
    assert harness.tools["pay"].calls == runs + 1


async def test_a_reconcile_hooks_not_started_opens_a_round_with_no_approval(
    harness: Harness,
) -> None:
    tool = harness.tools["ledger.move"]
    assert isinstance(tool, ReconcilingTool)

    async def not_started(invocation: ToolInvocation) -> Reconciliation:
        return Reconciliation(outcome="not_started", evidence="no such transfer")

    cid, key = await _consented_then_uncertain(harness, "ledger.move", LEAD_A)
    runs = tool.calls
    tool.answer = not_started
    due_now(harness)
    await harness.lifecycle.reconciler.sweep()

    assert harness.sql(
        "SELECT boundary, resolved_by FROM resolutions WHERE idempotency_key = %s", key
    ) == [("EFFECT_NOT_STARTED", "reconciler:ledger.move (reconciler:-)")]
    consent = await _consent(harness, cid)
    assert (consent.state, consent.round, consent.approvals) == ("PENDING", 2, ())
    waiting = await harness.execute("ledger.move", PAYLOAD, causal_id="c-1")
    assert waiting.outcome == "confirmation_required"
    assert tool.calls == runs


@pytest.mark.parametrize(
    ("boundary", "outcome"),
    [(B.EFFECT_COMPLETED, "deduplicated"), (B.EFFECT_FAILED, "refused")],
)
async def test_completed_or_failed_allows_no_execution_and_leaves_the_consent_used_up(
    harness: Harness, boundary: B, outcome: str
) -> None:
    cid, key = await _consented_then_uncertain(harness, "pay", LEAD_A)
    runs = harness.tools["pay"].calls

    entry = await _resolve(harness, key, OUTSIDER, boundary)

    assert isinstance(entry.artifact, ResolutionArtifact)
    assert entry.artifact.consent is None
    consent = await _consent(harness, cid)
    assert (consent.state, consent.round) == ("CONSUMED", 1)
    assert (await harness.execute("pay", PAYLOAD, causal_id="c-1")).outcome == outcome
    assert harness.tools["pay"].calls == runs


async def test_a_new_round_expires_after_the_terms_ttl_from_when_it_opened(
    harness: Harness,
) -> None:
    cid, key = await _consented_then_uncertain(harness, "append", LEAD_A, LEAD_B)
    harness.let_time_pass(seconds=3600)  # the first round's expiry has long passed

    await _resolve(harness, key, OUTSIDER)

    consent = await _consent(harness, cid)
    # Opened by the database's clock (the one expiry is judged by), not the process's.
    [(db_now,)] = harness.sql("SELECT now()")
    assert consent.renewed_at is not None
    assert abs(consent.renewed_at - db_now) < timedelta(seconds=30)
    assert consent.expires_at - consent.renewed_at == timedelta(seconds=600)


async def test_a_new_round_is_asked_again_in_the_notifications(harness: Harness) -> None:
    cid, key = await _consented_then_uncertain(harness, "append", LEAD_A, LEAD_B)
    await _resolve(harness, key, OUTSIDER)
    await harness.lifecycle.manager.approve(LEAD_A, cid)
    await harness.lifecycle.manager.approve(LEAD_B, cid)

    events = harness.sql(
        "SELECT event_type, subject ->> 'round' FROM notify_outbox"
        " WHERE subject ->> 'confirmation_id' = %s ORDER BY occurred_at, event_type",
        cid,
    )
    assert sorted(events, key=str) == sorted(
        [
            ("confirmation.requested", None),
            ("confirmation.approved", None),
            ("confirmation.requested", "2"),
            ("confirmation.approved", "2"),
        ],
        key=str,
    )


async def test_the_requester_counts_in_the_new_round_only_where_self_approval_is_allowed(
    database_url: str,
) -> None:
    harness = await make_harness(
        database_url, policy=POLICY, allow_self_approval=True, instance_id="self-ok"
    )
    try:
        cid, key = await _consented_then_uncertain(harness, "append", LEAD_A, LEAD_B)
        requester = approver(AGENT.principal_id, "payments-leads")
        await _resolve(harness, key, requester)
        consent = await _consent(harness, cid)
        assert (consent.state, [a.principal_id for a in consent.approvals]) == (
            "PENDING",
            [AGENT.principal_id],
        )
    finally:
        await harness.close()


async def test_resolving_an_attempt_a_later_one_superseded_opens_no_round(
    harness: Harness,
) -> None:
    # An idempotent tool may go again after an uncertain attempt under the consent (it
    # dedupes): the later attempt is what the retry table reads, so resolving the first
    # one re-opens nothing.
    cid, key = await _consented_then_uncertain(harness, "note", LEAD_A)
    second = await harness.execute("note", PAYLOAD, causal_id="c-1")
    assert (second.outcome, second.attempt) == ("executed", 2)

    entry = await _resolve(harness, key, LEAD_B)

    assert isinstance(entry.artifact, ResolutionArtifact)
    assert entry.artifact.consent is None
    consent = await _consent(harness, cid)
    assert (consent.state, consent.round) == ("CONSUMED", 1)
    assert (await harness.execute("note", PAYLOAD, causal_id="c-1")).outcome == "deduplicated"


class _AdmitBeforeResolve:
    """A store whose first resolve lets ``before`` run first: another attempt of the
    decision admitted between the service's read and its write."""

    def __init__(self, inner: LifecycleStore) -> None:
        self._inner = inner
        self.before: Callable[[], Awaitable[object]] | None = None
        self.answers: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def resolve(self, resolution: Resolution) -> ResolveAnswer:
        if self.before is not None:
            before, self.before = self.before, None
            await before()
        answer = await self._inner.resolve(resolution)
        self.answers.append(answer.status)
        return answer


async def test_a_round_decided_on_a_read_that_moved_is_stale_and_decided_again(
    database_url: str,
) -> None:
    made: list[_AdmitBeforeResolve] = []

    def wrap(inner: LifecycleStore) -> Any:
        made.append(_AdmitBeforeResolve(inner))
        return made[0]

    tools = {"note": ScriptedTool(tool_definition("note", replay_safety=ReplaySafety.IDEMPOTENT))}
    harness = await make_harness(
        database_url, tools=tools, policy=POLICY, wrap_store=wrap, instance_id="race-renew"
    )
    try:
        cid, key = await _consented_then_uncertain(harness, "note", LEAD_A)
        made[0].before = lambda: harness.execute("note", PAYLOAD, causal_id="c-1")

        entry = await _resolve(harness, key, LEAD_B)

        assert made[0].answers == ["stale", "appended"]
        assert isinstance(entry.artifact, ResolutionArtifact)
        assert entry.artifact.consent is None
        consent = await _consent(harness, cid)
        assert (consent.state, consent.round) == ("CONSUMED", 1)
    finally:
        await harness.close()

"""Approvals that scale (issue 16), through the SyscallHandler on PostgreSQL: approver
groups, a quorum of distinct approvers, per-tool expiry by the database's clock, the
expiry sweep, the re-check at use (approval_stale), and denied or expired consents in
the journal as refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from arvis.domain.authorization import ApprovalTerms
from arvis.domain.ids import ConfirmationId, RunId
from arvis.lifecycle.errors import (
    AlreadyApproved,
    ApproverNotInGroup,
    ConfirmationStateConflict,
    SelfApproval,
)
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.results import SyscallResult
from tests.support.lifecycle import AGENT, Harness, make_harness
from tests.support.operators import LEAD_A, LEAD_B, LEAD_C, OUTSIDER, approver

PAYLOAD = {"to": "acct-9", "cents": 500}
TERMS = ApprovalTerms(approvers=("payments-leads",), quorum=2, ttl_s=600)
POLICY = PolicyConfig(version="v1", default=TenantRules(approvals={"append": TERMS}))


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    built = await make_harness(database_url, policy=POLICY)
    try:
        yield built
    finally:
        await built.close()


async def _asked(harness: Harness, causal_id: str) -> tuple[SyscallResult, ConfirmationId]:
    answer = await harness.execute("append", PAYLOAD, causal_id=causal_id)
    assert answer.outcome == "confirmation_required"
    assert answer.confirmation is not None
    return answer, ConfirmationId(answer.confirmation.id)


async def test_a_quorum_of_two_needs_two_distinct_approvers_of_its_group(harness: Harness) -> None:
    manager = harness.lifecycle.consent
    _, cid = await _asked(harness, "c-q")

    with pytest.raises(ApproverNotInGroup):
        await manager.approve(OUTSIDER, cid)
    first = await manager.approve(LEAD_A, cid)
    assert first.state == "PENDING"
    assert [a.principal_id for a in first.approvals] == ["lead-a"]
    with pytest.raises(AlreadyApproved):
        await manager.approve(LEAD_A, cid)
    waiting = await harness.execute("append", PAYLOAD, causal_id="c-q")
    assert waiting.outcome == "confirmation_required"
    assert harness.tools["append"].calls == 0

    second = await manager.approve(LEAD_B, cid)
    assert second.state == "APPROVED"
    assert [(a.principal_id, a.key_id) for a in second.approvals] == [
        ("lead-a", "k_lead-a"),
        ("lead-b", "k_lead-b"),
    ]
    assert second.decided_by is not None
    assert second.decided_by.startswith("lead-b")
    with pytest.raises(ConfirmationStateConflict):
        await manager.approve(LEAD_C, cid)  # past the quorum
    with pytest.raises(AlreadyApproved):
        await manager.approve(LEAD_B, cid)  # a retry whose answer was lost: it stands

    ran = await harness.execute("append", PAYLOAD, causal_id="c-q")
    assert ran.outcome == "executed"
    assert harness.tools["append"].calls == 1
    decisions = harness.sql(
        "SELECT body::jsonb ->> 'state', body::jsonb ->> 'approvals' FROM journal_entries"
        " WHERE kind = 'confirmation' AND idempotency_key = %s ORDER BY position",
        ran.idempotency_key,
    )
    assert decisions == [("PENDING", "1"), ("APPROVED", "2")]


@pytest.mark.parametrize("quorum", [1, 2])
async def test_concurrent_approvals_meet_the_quorum_exactly_once(
    database_url: str, quorum: int
) -> None:
    terms = ApprovalTerms(approvers=("payments-leads",), quorum=quorum)
    policy = PolicyConfig(version=f"q{quorum}", default=TenantRules(approvals={"append": terms}))
    harness = await make_harness(database_url, policy=policy, instance_id=f"race-{quorum}")
    try:
        _, cid = await _asked(harness, f"c-race-{quorum}")
        results = await asyncio.gather(
            harness.lifecycle.consent.approve(LEAD_A, cid),
            harness.lifecycle.consent.approve(LEAD_B, cid),
            return_exceptions=True,
        )
        record = await harness.lifecycle.consent.confirmation(AGENT.tenant_id, cid)
        assert record.state == "APPROVED"
        assert len(record.approvals) == quorum
        refused = [r for r in results if isinstance(r, Exception)]
        assert len(refused) == 2 - quorum
        assert all(isinstance(r, ConfirmationStateConflict) for r in refused)
    finally:
        await harness.close()


async def test_the_requester_counts_toward_no_quorum_even_in_the_group(harness: Harness) -> None:
    _, cid = await _asked(harness, "c-self")
    requester = approver(AGENT.principal_id, "payments-leads")
    with pytest.raises(SelfApproval):
        await harness.lifecycle.consent.approve(requester, cid)


async def test_a_deny_by_any_approver_denies_and_the_journal_shows_a_refusal(
    harness: Harness,
) -> None:
    manager = harness.lifecycle.consent
    asked, cid = await _asked(harness, "c-deny")
    await manager.approve(LEAD_A, cid)
    with pytest.raises(ApproverNotInGroup):
        await manager.deny(OUTSIDER, cid, "not mine to say")
    denied = await manager.deny(LEAD_B, cid, "wrong account")
    assert denied.state == "DENIED"

    [entry] = harness.sql(
        "SELECT boundary, body::jsonb ->> 'decision' FROM journal_entries"
        " WHERE kind = 'confirmation' AND idempotency_key = %s AND boundary IS NOT NULL",
        asked.idempotency_key,
    )
    assert entry == ("PRE_EFFECT_REFUSAL", "DENIED")
    [result] = [
        r
        for r in await harness.lifecycle.replay.replay(AGENT.tenant_id, RunId(harness.run_id))
        if r.causal_id == "c-deny"
    ]
    assert (result.outcome, result.reason) == ("refused", "confirmation_denied")
    again = await harness.execute("append", PAYLOAD, causal_id="c-deny")
    assert again.reason == "confirmation_denied"
    assert harness.tools["append"].calls == 0


async def test_the_tools_ttl_sets_the_expiry(harness: Harness) -> None:
    _, cid = await _asked(harness, "c-ttl")
    record = await harness.lifecycle.consent.confirmation(AGENT.tenant_id, cid)
    assert record.expires_at - record.created_at == timedelta(seconds=600)
    assert (record.quorum, record.approver_groups) == (2, ("payments-leads",))


async def test_the_expiry_sweep_moves_expired_consents_to_expired_as_refusals(
    harness: Harness,
) -> None:
    asked, cid = await _asked(harness, "c-sweep")
    harness.sql(
        "UPDATE confirmations SET expires_at = now() - interval '1 second'"
        " WHERE confirmation_id = %s",
        cid,
    )
    assert await harness.lifecycle.consent.expire_due() >= 1
    assert harness.confirmation_state(cid) == "EXPIRED"
    [entry] = harness.sql(
        "SELECT boundary, body::jsonb -> 'decided_by' ->> 'principal_id' FROM journal_entries"
        " WHERE kind = 'confirmation' AND idempotency_key = %s",
        asked.idempotency_key,
    )
    assert entry == ("PRE_EFFECT_REFUSAL", "arvis:expiry")
    again = await harness.execute("append", PAYLOAD, causal_id="c-sweep")
    assert again.reason == "confirmation_expired"


async def test_an_approval_expired_by_the_database_clock_is_refused_at_use(
    harness: Harness,
) -> None:
    manager = harness.lifecycle.consent
    _, cid = await _asked(harness, "c-dbclock")
    await manager.approve(LEAD_A, cid)
    await manager.approve(LEAD_B, cid)
    # This process's clock still says the approval is valid; the database's does not.
    harness.sql(
        "UPDATE confirmations SET expires_at = now() - interval '1 second'"
        " WHERE confirmation_id = %s",
        cid,
    )
    refused = await harness.execute("append", PAYLOAD, causal_id="c-dbclock")
    assert refused.reason == "confirmation_expired"
    assert harness.confirmation_state(cid) == "EXPIRED"
    assert harness.tools["append"].calls == 0


async def test_an_approval_under_a_changed_policy_is_stale_and_never_runs(
    harness: Harness, database_url: str
) -> None:
    manager = harness.lifecycle.consent
    _, cid = await _asked(harness, "c-stale")
    await manager.approve(LEAD_A, cid)
    await manager.approve(LEAD_B, cid)
    changed = PolicyConfig(version="v2", default=TenantRules(approvals={"append": TERMS}))
    redeployed = await make_harness(
        database_url,
        tools=harness.tools,
        policy=changed,
        instance_id="redeployed",
        clock=harness.clock,
    )
    try:
        refused = await redeployed.execute(
            "append", PAYLOAD, causal_id="c-stale", run_id=harness.run_id
        )
        again = await redeployed.execute(
            "append", PAYLOAD, causal_id="c-stale", run_id=harness.run_id
        )
    finally:
        await redeployed.close()
    assert refused.reason == "approval_stale"
    assert again.reason == "approval_stale"
    assert harness.confirmation_state(cid) == "EXPIRED"
    assert harness.tools["append"].calls == 0


async def test_an_approval_entry_is_observed_like_every_append(harness: Harness) -> None:
    # What the checkpointer hears of: every entry appended, approvals included.
    seen: list[tuple[str, int]] = []
    harness.store.ops.append_observers.append(lambda e: seen.append((e.kind, e.position)))
    _, cid = await _asked(harness, "c-obs")
    await harness.lifecycle.consent.approve(LEAD_A, cid)
    approved = await harness.lifecycle.consent.approve(LEAD_B, cid)
    assert approved.state == "APPROVED"
    assert [kind for kind, _ in seen].count("confirmation") == 2
    assert [position for _, position in seen] == sorted(position for _, position in seen)

"""Consent and quorum approval (DESIGN §2, issue 16) on the in-memory store: PENDING until
the quorum of distinct approvers of the groups is met, RESERVED at admission, CONSUMED or
released by the outcome; expiry by the one clock; a resolution as not started of a
consented attempt opens the consent's next round (DESIGN §10)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arvis.domain.authorization import ApprovalTerms
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import ConfirmationId, RunId
from arvis.lifecycle.errors import (
    AlreadyApproved,
    ApproverNotInGroup,
    ConfirmationStateConflict,
)
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from tests.support.fakelifecycle import FakeHarness, make_fake_harness
from tests.support.operators import LEAD_A, LEAD_B, OUTSIDER

PAYLOAD = {"line": "pay 500"}
POLICY = PolicyConfig(
    version="v1",
    default=TenantRules(
        approvals={"append": ApprovalTerms(approvers=("payments-leads",), quorum=2, ttl_s=600)}
    ),
)


@pytest.fixture
async def harness() -> AsyncIterator[FakeHarness]:
    built = await make_fake_harness(policy=POLICY)
    try:
        yield built
    finally:
        await built.close()


async def _asked(harness: FakeHarness, causal_id: str = "c") -> ConfirmationId:
    result = await harness.execute("append", PAYLOAD, causal_id=causal_id)
    assert result.outcome == "confirmation_required"
    assert result.confirmation is not None
    return ConfirmationId(result.confirmation.id)


async def test_nothing_runs_until_the_quorum_of_distinct_approvers_is_met(
    harness: FakeHarness,
) -> None:
    cid = await _asked(harness)
    assert await _asked(harness) == cid
    manager = harness.lifecycle.manager
    with pytest.raises(ApproverNotInGroup):
        await manager.approve(OUTSIDER, cid)
    await manager.approve(LEAD_A, cid)
    assert harness.confirmation_state(cid) == "PENDING"
    with pytest.raises(AlreadyApproved):
        await manager.approve(LEAD_A, cid)
    waiting = await harness.execute("append", PAYLOAD, causal_id="c")
    assert waiting.outcome == "confirmation_required"
    await manager.approve(LEAD_B, cid)
    assert harness.confirmation_state(cid) == "APPROVED"
    consent = await manager.confirmation(LEAD_A.tenant_id, cid)
    assert [a.principal_id for a in consent.approvals] == ["lead-a", "lead-b"]

    ran = await harness.execute("append", PAYLOAD, causal_id="c")
    assert (ran.outcome, ran.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert harness.confirmation_state(cid) == "CONSUMED"
    assert harness.tools["append"].calls == 1
    kinds = [e.kind for e in harness.entries()]
    assert kinds == ["confirmation", "confirmation", "execution"]


async def test_a_not_started_outcome_releases_the_consent_for_a_retry(
    harness: FakeHarness,
) -> None:
    cid = await _asked(harness)
    for lead in (LEAD_A, LEAD_B):
        await harness.lifecycle.manager.approve(lead, cid)
    harness.tools["append"].then_fail(effect_started=False, retryable=False)
    first = await harness.execute("append", PAYLOAD, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert harness.confirmation_state(cid) == "APPROVED"
    second = await harness.execute("append", PAYLOAD, causal_id="c")
    assert (second.boundary, second.attempt) == (EffectBoundary.EFFECT_COMPLETED, 2)
    assert harness.confirmation_state(cid) == "CONSUMED"


async def test_a_denied_consent_refuses_the_action(harness: FakeHarness) -> None:
    cid = await _asked(harness)
    await harness.lifecycle.manager.deny(LEAD_A, cid, "no")
    refused = await harness.execute("append", PAYLOAD, causal_id="c")
    assert (refused.outcome, refused.reason) == ("refused", "confirmation_denied")
    with pytest.raises(ConfirmationStateConflict):
        await harness.lifecycle.manager.approve(LEAD_B, cid)
    assert harness.tools["append"].calls == 0


async def test_a_consent_expires_by_the_one_clock(harness: FakeHarness) -> None:
    cid = await _asked(harness)
    harness.clock.advance(seconds=601)
    refused = await harness.execute("append", PAYLOAD, causal_id="c")
    assert (refused.outcome, refused.reason) == ("refused", "confirmation_expired")
    assert harness.confirmation_state(cid) == "EXPIRED"
    assert harness.tools["append"].calls == 0


async def test_an_outsiders_not_started_opens_a_round_that_needs_the_whole_quorum(
    harness: FakeHarness,
) -> None:
    cid = await _asked(harness)
    for lead in (LEAD_A, LEAD_B):
        await harness.lifecycle.manager.approve(lead, cid)
    harness.tools["append"].then_fail(effect_started=None, retryable=False)
    ran = await harness.execute("append", PAYLOAD, causal_id="c")
    assert ran.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert harness.confirmation_state(cid) == "CONSUMED"

    await harness.lifecycle.resolutions.resolve(
        OUTSIDER,
        RunId(harness.run_id),
        ran.idempotency_key,
        1,
        EffectBoundary.EFFECT_NOT_STARTED,
        "the far side has no such request",
    )

    consent = await harness.lifecycle.manager.confirmation(LEAD_A.tenant_id, cid)
    assert (consent.state, consent.round, consent.approvals) == ("PENDING", 2, ())
    waiting = await harness.execute("append", PAYLOAD, causal_id="c")
    assert waiting.outcome == "confirmation_required"
    for lead in (LEAD_A, LEAD_B):
        await harness.lifecycle.manager.approve(lead, cid)
    again = await harness.execute("append", PAYLOAD, causal_id="c")
    assert (again.outcome, again.attempt) == ("executed", 2)
    assert harness.tools["append"].calls == 2

"""Consent: PENDING → APPROVED/DENIED, RESERVED at admission, CONSUMED or released."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, PrincipalId, TenantId
from arvis.lifecycle.errors import AlreadyApproved, ConfirmationStateConflict, NotFound
from tests.support.lifecycle import APPROVER, FakeClock, Harness, make_harness


async def _pending(harness: Harness, causal_id: str = "c") -> str:
    result = await harness.execute("append", {"line": "hello"}, causal_id=causal_id)
    assert result.outcome == "confirmation_required"
    assert result.confirmation is not None
    assert result.confirmation.state == "PENDING"
    return result.confirmation.id


async def test_a_mutating_unsafe_tool_needs_consent_and_nothing_is_minted(
    harness: Harness,
) -> None:
    result = await harness.execute("append", {"line": "hello"})
    assert result.outcome == "confirmation_required"
    assert result.boundary is None
    assert harness.capability_states(result.idempotency_key) == []
    assert harness.tools["append"].calls == 0
    assert harness.in_flight() == []


async def test_asking_again_while_pending_answers_the_same_confirmation(
    harness: Harness,
) -> None:
    first = await _pending(harness)
    assert await _pending(harness) == first


async def test_an_approved_action_runs_once_and_consumes_its_confirmation(
    harness: Harness,
) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    assert harness.confirmation_state(confirmation) == "APPROVED"
    decided_by = harness.sql(
        "SELECT decided_by FROM confirmations WHERE confirmation_id = %s", confirmation
    )[0][0]
    assert "ops-lead" in decided_by

    result = await harness.execute("append", {"line": "hello"}, causal_id="c")

    assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert harness.confirmation_state(confirmation) == "CONSUMED"
    assert harness.tools["append"].calls == 1
    again = await harness.execute("append", {"line": "hello"}, causal_id="c")
    assert again.outcome == "deduplicated"
    assert harness.tools["append"].calls == 1


async def test_a_not_started_effect_releases_the_confirmation_for_a_retry(
    harness: Harness,
) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    harness.tools["append"].then_fail(effect_started=False, retryable=False)

    first = await harness.execute("append", {"line": "hello"}, causal_id="c")
    assert first.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert harness.confirmation_state(confirmation) == "APPROVED"

    second = await harness.execute("append", {"line": "hello"}, causal_id="c")
    assert (second.boundary, second.attempt) == (EffectBoundary.EFFECT_COMPLETED, 2)
    assert harness.confirmation_state(confirmation) == "CONSUMED"


async def test_an_unknown_outcome_consumes_the_confirmation(harness: Harness) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    harness.tools["append"].then_fail(effect_started=None, retryable=False)

    first = await harness.execute("append", {"line": "hello"}, causal_id="c")

    assert first.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert harness.confirmation_state(confirmation) == "CONSUMED"
    again = await harness.execute("append", {"line": "hello"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"


async def test_a_denied_confirmation_refuses_the_action(harness: Harness) -> None:
    confirmation = await _pending(harness)
    await harness.deny(confirmation)

    result = await harness.execute("append", {"line": "hello"}, causal_id="c")

    assert (result.outcome, result.reason) == ("refused", "confirmation_denied")
    assert harness.confirmation_state(confirmation) == "DENIED"
    assert harness.tools["append"].calls == 0


async def test_an_approved_confirmation_may_still_be_denied_before_it_is_used(
    harness: Harness,
) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    await harness.deny(confirmation)
    result = await harness.execute("append", {"line": "hello"}, causal_id="c")
    assert result.reason == "confirmation_denied"


async def test_a_confirmation_expires_after_its_time_to_live(harness: Harness) -> None:
    confirmation = await _pending(harness)
    harness.let_time_pass(hours=25)

    result = await harness.execute("append", {"line": "hello"}, causal_id="c")

    assert (result.outcome, result.reason) == ("refused", "confirmation_expired")
    assert harness.confirmation_state(confirmation) == "EXPIRED"
    with pytest.raises(ConfirmationStateConflict):
        await harness.approve(confirmation)


async def test_approving_an_expired_confirmation_fails_and_marks_it_expired(
    harness: Harness,
) -> None:
    confirmation = await _pending(harness)
    harness.let_time_pass(hours=25)
    with pytest.raises(ConfirmationStateConflict, match="expired"):
        await harness.approve(confirmation)
    assert harness.confirmation_state(confirmation) == "EXPIRED"


async def test_approving_twice_says_the_first_approval_stands(harness: Harness) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    with pytest.raises(AlreadyApproved):
        await harness.approve(confirmation)  # a retry whose answer was lost


async def test_approving_a_decided_confirmation_is_a_conflict(harness: Harness) -> None:
    confirmation = await _pending(harness)
    await harness.approve(confirmation)
    other = APPROVER.model_copy(update={"principal_id": PrincipalId("ops-2"), "key_id": "k_o2"})
    with pytest.raises(ConfirmationStateConflict):
        await harness.approve(confirmation, other)


async def test_an_approver_of_another_tenant_cannot_see_the_confirmation(
    harness: Harness,
) -> None:
    confirmation = await _pending(harness)
    stranger = Identity(
        tenant_id=TenantId("globex"),
        principal_id=PrincipalId("ops"),
        method="api_key",
        key_id="k_g",
        roles=("approver",),
    )
    with pytest.raises(NotFound):
        await harness.lifecycle.manager.approve(stranger, ConfirmationId(confirmation))
    assert harness.confirmation_state(confirmation) == "PENDING"


async def test_pending_confirmations_are_listed_per_tenant(harness: Harness) -> None:
    mine = await _pending(harness, "c1")
    listed = await harness.lifecycle.manager.list_confirmations(APPROVER.tenant_id, "PENDING")
    assert mine in [c.confirmation_id for c in listed]
    others = await harness.lifecycle.manager.list_confirmations(TenantId("globex"), None)
    assert others == []


def _last_entry(harness: Harness) -> tuple[str, str | None, dict[str, object]]:
    [(kind, boundary, body)] = harness.sql(
        "SELECT kind, boundary, body::jsonb FROM journal_entries WHERE run_id = %s"
        " ORDER BY position DESC LIMIT 1",
        harness.run_id,
    )
    return kind, boundary, body


async def test_a_consent_found_lapsed_at_use_is_journaled_as_the_sweep_journals_an_expiry(
    harness: Harness,
) -> None:
    # One journal shape for an expiry (issue 24): found at the moment of use, it is
    # the consent's end, as the expiry sweep writes it, and the syscall is refused.
    used = await _pending(harness, causal_id="c-used")
    await harness.approve(used)
    swept = await _pending(harness, causal_id="c-swept")
    harness.let_time_pass(hours=25)

    refused = await harness.execute("append", {"line": "hello"}, causal_id="c-used")
    at_use = _last_entry(harness)
    assert await harness.lifecycle.manager.expire_due() >= 1
    assert harness.confirmation_state(swept) == "EXPIRED"
    by_sweep = _last_entry(harness)

    assert (refused.outcome, refused.reason, refused.attempt) == (
        "refused",
        "confirmation_expired",
        None,
    )
    for (kind, boundary, body), confirmation in ((at_use, used), (by_sweep, swept)):
        assert (kind, boundary) == ("confirmation", "PRE_EFFECT_REFUSAL")
        assert body["confirmation_id"] == confirmation
        assert (body["decision"], body["reason"]) == ("EXPIRED", "expired")
        assert body["decided_by"] == {
            "principal_id": "arvis:expiry",
            "auth_method": "system",
            "key_id": None,
        }
    assert harness.tools["append"].calls == 0


async def test_consent_holds_whatever_the_processs_clock_says(database_url: str) -> None:
    # The process's clock years behind the database's: a consent lives its time to
    # live by the database's clock, so it is approved and used, not found expired.
    harness = await make_harness(
        database_url, clock=FakeClock(datetime(2019, 3, 1, 8, 0, tzinfo=UTC))
    )
    try:
        confirmation = await _pending(harness)
        await harness.approve(confirmation)
        result = await harness.execute("append", {"line": "hello"}, causal_id="c")
        assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
        [(lifetime,)] = harness.sql(
            "SELECT expires_at - created_at FROM confirmations WHERE confirmation_id = %s",
            confirmation,
        )
        assert lifetime == timedelta(hours=24)
    finally:
        await harness.close()

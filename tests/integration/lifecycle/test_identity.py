"""The caller's identity against the run and the consent it would act under: a run is
bound to the principal that opened it (DESIGN §10), so another principal's syscalls on it
are refused and write nothing; consent is bound to the principal that asked for it, in
every state, before and after it is used (DESIGN §4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId
from arvis.lifecycle.errors import IdentityRefused, RunOfAnotherPrincipal, SelfApproval
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from tests.support.lifecycle import AGENT, APPROVER, Harness, make_harness

INTRUDER = AGENT.model_copy(update={"principal_id": PrincipalId("agent-9"), "key_id": "k9"})
# The same principal under another (rotated) key.
AGENT_SECOND_KEY = AGENT.model_copy(update={"key_id": "k-rotated"})
# One key holding both roles: the self-approval of finding 2.
AGENT_AND_APPROVER = AGENT.model_copy(update={"roles": ("agent", "approver")})


def _journal(harness: Harness) -> list[tuple[int, str]]:
    return [
        (int(position), str(kind))
        for position, kind in harness.sql(
            "SELECT position, kind FROM journal_entries WHERE run_id = %s ORDER BY position",
            harness.run_id,
        )
    ]


async def test_another_principal_cannot_resume_approved_consent(harness: Harness) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)
    journal = _journal(harness)

    with pytest.raises(RunOfAnotherPrincipal):
        await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    # Refused before anything was minted or written; the consent is untouched.
    assert _journal(harness) == journal
    assert harness.capability_states(pending.idempotency_key) == []
    assert harness.confirmation_state(pending.confirmation.id) == "APPROVED"
    assert harness.in_flight() == []
    assert harness.tools["append"].calls == 0

    rightful = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert (rightful.outcome, rightful.attempt) == ("executed", 1)
    assert harness.capability_states(pending.idempotency_key) == ["CONSUMED"]


@pytest.fixture
async def consented_write(database_url: str) -> AsyncIterator[Harness]:
    built = await make_harness(
        database_url, policy=PolicyConfig(default=TenantRules(consent_tools=["write"]))
    )
    try:
        yield built
    finally:
        await built.close()


async def test_consumed_consent_is_not_reused_by_another_principal(
    consented_write: Harness,
) -> None:
    # An idempotent tool under consent whose attempt failed with retry advised:
    # the confirmation is CONSUMED and the retry table allows another attempt.
    harness = consented_write
    harness.tools["write"].then_fail(effect_started=True, retryable=True)
    pending = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)
    failed = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert failed.boundary == "EFFECT_FAILED"
    assert harness.confirmation_state(pending.confirmation.id) == "CONSUMED"

    with pytest.raises(RunOfAnotherPrincipal):
        await harness.execute("write", {"text": "x"}, causal_id="c", identity=INTRUDER)

    assert harness.tools["write"].calls == 1
    assert harness.capability_states(failed.idempotency_key) == ["CONSUMED"]
    rightful = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (rightful.outcome, rightful.attempt) == ("executed", 2)


async def test_a_pending_reask_by_another_principal_gets_no_confirmation(
    harness: Harness,
) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None

    with pytest.raises(RunOfAnotherPrincipal) as refused:
        await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    assert pending.confirmation.id not in str(refused.value)
    assert harness.confirmation_state(pending.confirmation.id) == "PENDING"


async def test_a_strangers_post_never_makes_an_uncertain_outcome_retryable(
    harness: Harness,
) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)
    harness.tools["append"].then_fail(effect_started=None, retryable=False)
    unknown = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert unknown.boundary == "EFFECT_STATE_UNKNOWN"
    journal = _journal(harness)

    with pytest.raises(RunOfAnotherPrincipal):
        await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    assert _journal(harness) == journal
    # The requester still meets the table.
    again = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1


async def test_a_completed_decision_is_never_answered_to_another_principal(
    harness: Harness,
) -> None:
    done = await harness.execute("write", {"text": "secret"}, causal_id="c")
    assert done.outcome == "executed"

    with pytest.raises(RunOfAnotherPrincipal) as refused:
        await harness.execute("write", {"text": "secret"}, causal_id="c", identity=INTRUDER)

    assert "secret" not in str(refused.value)
    assert [kind for _, kind in _journal(harness)] == ["execution"]
    # The same key of another principal reaches the same run's owner only.
    again = await harness.execute(
        "write", {"text": "secret"}, causal_id="c", identity=AGENT_SECOND_KEY
    )
    assert again.outcome == "deduplicated"


async def test_two_principals_opening_one_run_at_once_bind_it_to_exactly_one(
    harness: Harness,
) -> None:
    for round_ in range(8):
        run_id = f"{harness.run_id}-race-{round_}"
        answers = await asyncio.gather(
            harness.execute("write", {"text": "a"}, causal_id="a", run_id=run_id),
            harness.execute(
                "write", {"text": "b"}, causal_id="b", run_id=run_id, identity=INTRUDER
            ),
            return_exceptions=True,
        )
        won = [a for a in answers if not isinstance(a, BaseException)]
        lost = [a for a in answers if isinstance(a, BaseException)]
        assert len(won) == 1, answers
        assert len(lost) == 1, answers
        assert isinstance(lost[0], RunOfAnotherPrincipal), answers
        winner = AGENT if won[0].causal_id == "a" else INTRUDER
        assert harness.sql("SELECT principal_id FROM runs WHERE run_id = %s", run_id) == [
            (winner.principal_id,)
        ]
        assert harness.sql("SELECT causal_id FROM decisions WHERE run_id = %s", run_id) == [
            (won[0].causal_id,)
        ]


async def test_the_requester_cannot_approve_their_own_request(harness: Harness) -> None:
    pending = await harness.execute(
        "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
    )
    assert pending.confirmation is not None

    with pytest.raises(SelfApproval):
        await harness.approve(pending.confirmation.id, approver=AGENT_AND_APPROVER)

    assert harness.confirmation_state(pending.confirmation.id) == "PENDING"
    still = await harness.execute(
        "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
    )
    assert still.outcome == "confirmation_required"
    # Four eyes: another approver may, and who decided, and when, is recorded.
    await harness.approve(pending.confirmation.id, approver=APPROVER)
    decided = harness.sql(
        "SELECT decided_by, decided_at IS NOT NULL FROM confirmations WHERE confirmation_id = %s",
        pending.confirmation.id,
    )
    assert decided == [("ops-lead (api_key:k_ops)", True)]
    entry = harness.sql(
        "SELECT kind, body FROM journal_entries WHERE run_id = %s AND kind = 'confirmation'",
        harness.run_id,
    )
    assert len(entry) == 1
    assert '"decision":"APPROVED"' in entry[0][1]
    assert '"principal_id":"ops-lead"' in entry[0][1]


async def test_self_approval_when_the_deployment_allows_it(database_url: str) -> None:
    harness = await make_harness(database_url, allow_self_approval=True)
    try:
        pending = await harness.execute(
            "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
        )
        assert pending.confirmation is not None
        await harness.approve(pending.confirmation.id, approver=AGENT_AND_APPROVER)
        ran = await harness.execute(
            "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
        )
        assert ran.outcome == "executed"
    finally:
        await harness.close()


async def test_a_requester_may_withdraw_their_own_request(harness: Harness) -> None:
    pending = await harness.execute(
        "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
    )
    assert pending.confirmation is not None
    await harness.deny(pending.confirmation.id, approver=AGENT_AND_APPROVER)
    refused = await harness.execute(
        "append", {"line": "x"}, causal_id="c", identity=AGENT_AND_APPROVER
    )
    assert refused.reason == "confirmation_denied"


@pytest.mark.parametrize("method", ["development", "anonymous"])
async def test_production_refuses_development_and_anonymous_identities(
    database_url: str, method: str
) -> None:
    harness = await make_harness(database_url, production=True)
    try:
        weak = Identity(tenant_id=AGENT.tenant_id, principal_id=AGENT.principal_id, method=method)  # type: ignore[arg-type]
        with pytest.raises(IdentityRefused):
            await harness.execute("read", {}, identity=weak)
        assert (await harness.execute("read", {})).outcome == "executed"
        assert harness.tools["read"].calls == 1
    finally:
        await harness.close()

"""The caller's identity against the consent it would act under (DESIGN §4): consent is
bound to the principal that asked for it, in every state, before and after it is used."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId
from arvis.lifecycle.errors import IdentityRefused, SelfApproval
from arvis.lifecycle.policy import PolicyConfig, TenantRules
from tests.support.lifecycle import AGENT, APPROVER, Harness, make_harness

INTRUDER = AGENT.model_copy(update={"principal_id": PrincipalId("agent-9"), "key_id": "k9"})
# One key holding both roles: the self-approval of finding 2.
AGENT_AND_APPROVER = AGENT.model_copy(update={"roles": ("agent", "approver")})


async def test_another_principal_cannot_resume_approved_consent(harness: Harness) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)

    stolen = await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    assert (stolen.outcome, stolen.reason) == ("refused", "identity_mismatch")
    # Refused before anything was minted or written; the consent is untouched.
    assert harness.capability_states(stolen.idempotency_key) == []
    assert harness.confirmation_state(pending.confirmation.id) == "APPROVED"
    assert harness.in_flight() == []
    assert harness.tools["append"].calls == 0

    rightful = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert (rightful.outcome, rightful.attempt) == ("executed", 1)
    assert harness.capability_states(stolen.idempotency_key) == ["CONSUMED"]


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

    stolen = await harness.execute("write", {"text": "x"}, causal_id="c", identity=INTRUDER)

    assert (stolen.outcome, stolen.reason) == ("refused", "identity_mismatch")
    assert harness.tools["write"].calls == 1
    assert harness.capability_states(stolen.idempotency_key) == ["CONSUMED"]
    rightful = await harness.execute("write", {"text": "x"}, causal_id="c")
    assert (rightful.outcome, rightful.attempt) == ("executed", 2)


async def test_a_pending_reask_by_another_principal_gets_no_confirmation(
    harness: Harness,
) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None

    reask = await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    assert (reask.outcome, reask.reason) == ("refused", "identity_mismatch")
    assert reask.confirmation is None
    assert pending.confirmation.id not in reask.model_dump_json()


async def test_a_strangers_refusal_never_makes_an_uncertain_outcome_retryable(
    harness: Harness,
) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)
    harness.tools["append"].then_fail(effect_started=None, retryable=False)
    unknown = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert unknown.boundary == "EFFECT_STATE_UNKNOWN"

    stolen = await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)
    assert stolen.reason == "identity_mismatch"

    # The stranger's refusal is not an attempt: the requester still meets the table.
    again = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert again.reason == "retry_prohibited_uncertain"
    assert harness.tools["append"].calls == 1


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

"""The caller's identity against the sealed context it resumes."""

from __future__ import annotations

import pytest

from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId
from arvis.lifecycle.errors import IdentityRefused
from tests.support.lifecycle import AGENT, Harness, make_harness

INTRUDER = AGENT.model_copy(update={"principal_id": PrincipalId("agent-9"), "key_id": "k9"})


async def test_resuming_someone_elses_consent_revokes_and_releases(harness: Harness) -> None:
    pending = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert pending.confirmation is not None
    await harness.approve(pending.confirmation.id)

    stolen = await harness.execute("append", {"line": "x"}, causal_id="c", identity=INTRUDER)

    assert (stolen.outcome, stolen.reason) == ("refused", "identity_mismatch")
    assert harness.capability_states(stolen.idempotency_key) == ["REVOKED"]
    assert harness.confirmation_state(pending.confirmation.id) == "APPROVED"
    assert harness.sql(
        "SELECT count(*) FROM intents WHERE idempotency_key = %s", stolen.idempotency_key
    ) == [(0,)]
    assert harness.tools["append"].calls == 0

    rightful = await harness.execute("append", {"line": "x"}, causal_id="c")
    assert (rightful.outcome, rightful.attempt) == ("executed", 2)
    assert harness.capability_states(stolen.idempotency_key) == ["REVOKED", "CONSUMED"]


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
        await harness.store.close()

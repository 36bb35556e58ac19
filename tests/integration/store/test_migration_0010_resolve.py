"""Revision 0010 (rounds of approval, issue 23) from a database that holds consents, and
back: the consents of revision 0009 are in their first round; downgrade keeps each
consent's current round of approvals and reinstalls revision 0006's function texts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arvis.domain.authorization import ApprovalTerms
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.store.migrate import downgrade, upgrade
from tests.support.lifecycle import make_harness
from tests.support.operators import LEAD_A, LEAD_B
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

TERMS = ApprovalTerms(approvers=("payments-leads",), quorum=2)
POLICY = PolicyConfig(version="v1", default=TenantRules(approvals={"append": TERMS}))
PAYLOAD = {"n": 1}


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


async def _renewed(url: str) -> str:
    """A quorum-2 consent, used up by an uncertain attempt and re-opened by a lead's
    resolution (round 2, one approval); answers its id."""
    harness = await make_harness(url, policy=POLICY)
    try:
        asked = await harness.execute("append", PAYLOAD, causal_id="c-1")
        assert asked.confirmation is not None
        await harness.approve(asked.confirmation.id, LEAD_A)
        await harness.approve(asked.confirmation.id, LEAD_B)
        harness.tools["append"].then_fail(effect_started=None, retryable=False)
        ran = await harness.execute("append", PAYLOAD, causal_id="c-1")
        await harness.lifecycle.resolutions.resolve(
            LEAD_A,
            RunId(harness.run_id),
            ran.idempotency_key,
            1,
            EffectBoundary.EFFECT_NOT_STARTED,
            "checked",
        )
        return asked.confirmation.id
    finally:
        await harness.close()


def _arguments(url: str, name: str) -> list[tuple[int]]:
    return _sql(url, "SELECT pronargs FROM pg_proc WHERE proname = %s", name)


async def test_downgrade_keeps_the_current_rounds_approvals_and_the_old_functions(
    database: str,
) -> None:
    cid = await _renewed(database)
    assert _sql(
        database,
        "SELECT round, principal_id FROM confirmation_approvals WHERE confirmation_id = %s"
        " ORDER BY round, principal_id",
        cid,
    ) == [(1, "lead-a"), (1, "lead-b"), (2, "lead-a")]

    downgrade(database, "0009")

    assert _sql(
        database, "SELECT principal_id FROM confirmation_approvals WHERE confirmation_id = %s", cid
    ) == [("lead-a",)]
    assert _sql(database, "SELECT state FROM confirmations WHERE confirmation_id = %s", cid) == [
        ("PENDING",)
    ]
    assert _arguments(database, "arvis_resolve") == [(10,)]
    assert _arguments(database, "arvis_approve") == [(14,)]
    notify = _sql(database, "SELECT prosrc FROM pg_proc WHERE proname = 'arvis_on_confirmation'")
    assert "round" not in notify[0][0]

    upgrade(database)

    assert _sql(
        database, "SELECT round, renewed_at FROM confirmations WHERE confirmation_id = %s", cid
    ) == [(1, None)]
    assert _arguments(database, "arvis_resolve") == [(11,)]
    assert _arguments(database, "arvis_approve") == [(15,)]


async def test_a_consent_of_revision_0009_is_in_its_first_round(pg_server_url: str) -> None:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        harness = await make_harness(url, policy=POLICY)
        try:
            asked = await harness.execute("append", PAYLOAD, causal_id="c-1")
            assert asked.confirmation is not None
            await harness.approve(asked.confirmation.id, LEAD_A)
        finally:
            await harness.close()
        downgrade(url, "0009")
        upgrade(url)
        harness = await make_harness(url, policy=POLICY, instance_id="after-upgrade")
        try:
            record = await harness.lifecycle.consent.approve(LEAD_B, asked.confirmation.id)
            assert (record.state, record.round) == ("APPROVED", 1)
            assert [a.principal_id for a in record.approvals] == ["lead-a", "lead-b"]
        finally:
            await harness.close()
    finally:
        drop_database(pg_server_url, url)

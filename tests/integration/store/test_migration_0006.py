"""Revision 0006 from a database that holds data: downgrade keeps what revision 0005 can
hold (consents, chains, keys) and reinstalls its functions; upgrade backfills the open
resolutions of uncertain entries; a journal holding resolutions refuses to downgrade."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import RunId
from arvis.store.migrate import downgrade, upgrade
from tests.support.lifecycle import APPROVER, crash_during_dispatch, make_harness
from tests.support.operators import LEAD_A
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


async def _populate(url: str) -> tuple[str, str]:
    """A consent approved by a group key, an uncertain attempt, their outbox events."""
    harness = await make_harness(url)
    try:
        asked = await harness.execute("append", {"n": 1}, causal_id="c-consent")
        assert asked.confirmation is not None
        await harness.approve(asked.confirmation.id, LEAD_A)
        key = await crash_during_dispatch(harness, "write", {"text": "t"}, causal_id="c-crash")
        await harness.lifecycle.sweeper.sweep()
        return harness.run_id, key
    finally:
        await harness.close()


async def test_downgrade_keeps_consents_and_chains_and_upgrade_reopens_uncertain_attempts(
    database: str,
) -> None:
    run_id, key = await _populate(database)
    chain = _sql(database, "SELECT position, entry_hash FROM journal_entries ORDER BY position")
    assert _sql(database, "SELECT count(*) FROM notify_outbox") != [(0,)]

    downgrade(database, "0005")

    assert (
        _sql(database, "SELECT position, entry_hash FROM journal_entries ORDER BY position")
        == chain
    )
    assert _sql(database, "SELECT state FROM confirmations") == [("APPROVED",)]
    assert _sql(
        database, "SELECT pronargs FROM pg_proc WHERE proname = 'arvis_request_consent'"
    ) == [(12,)]
    admit = _sql(database, "SELECT prosrc FROM pg_proc WHERE proname = 'arvis_admit'")[0][0]
    assert "expires_at > now()" not in admit
    tables = {row[0] for row in _sql(database, "SELECT tablename FROM pg_tables")}
    assert not {"resolutions", "notify_outbox", "confirmation_approvals"} & tables

    upgrade(database)

    assert _sql(
        database,
        "SELECT idempotency_key, attempt, boundary FROM resolutions WHERE run_id = %s",
        run_id,
    ) == [(key, 1, None)]
    harness = await make_harness(database, instance_id="after-upgrade")
    try:
        await harness.lifecycle.resolutions.resolve(
            APPROVER, RunId(run_id), key, 1, EffectBoundary.EFFECT_NOT_STARTED, "checked"
        )
    finally:
        await harness.close()


async def test_a_journal_holding_resolutions_is_not_downgraded(database: str) -> None:
    run_id, key = await _populate(database)
    harness = await make_harness(database, instance_id="resolver")
    try:
        await harness.lifecycle.resolutions.resolve(
            APPROVER, RunId(run_id), key, 1, EffectBoundary.EFFECT_COMPLETED, "checked"
        )
    finally:
        await harness.close()
    with pytest.raises(Exception, match="resolution entries"):
        downgrade(database, "0005")
    assert _sql(database, "SELECT version_num FROM alembic_version") == [("0006",)]

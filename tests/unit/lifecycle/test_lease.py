"""The lease's local deadline (DESIGN §6), on an in-memory lease table and a manual clock."""

from __future__ import annotations

from typing import cast

import pytest

from arvis.domain.errors import StoreUnavailable
from arvis.lifecycle.lease import InstanceLease, LeaseNotHeld
from arvis.lifecycle.ports import LifecycleStore
from tests.support.fakes import LeaseTable, ManualClock


def _lease(table: LeaseTable, clock: ManualClock, ttl_s: float = 10.0) -> InstanceLease:
    return InstanceLease(cast(LifecycleStore, table), "inst", ttl_s, monotonic=clock)


async def test_a_lease_is_held_until_its_local_deadline_short_of_the_ttl() -> None:
    table, clock = LeaseTable(), ManualClock()
    lease = _lease(table, clock)
    with pytest.raises(LeaseNotHeld):
        lease.require()
    assert await lease.claim() == "inst/1"
    clock.now += 8.9
    assert lease.require() == "inst/1"
    clock.now += 0.2  # past ttl less its margin: the database may already call it expired
    with pytest.raises(LeaseNotHeld):
        lease.require()


async def test_a_lease_lapsed_in_an_outage_answers_store_unavailable_and_recovers() -> None:
    table, clock = LeaseTable(), ManualClock()
    lease = _lease(table, clock)
    await lease.claim()
    table.reachable = False
    with pytest.raises(StoreUnavailable):
        await lease.beat()
    clock.now += 20
    # One answer for the whole outage: the store is unavailable, nothing ran.
    with pytest.raises(StoreUnavailable):
        lease.require()
    table.reachable = True
    await lease.beat()
    assert lease.require() == "inst/1"


async def test_a_lease_lapsed_without_an_outage_is_not_blamed_on_the_store() -> None:
    table, clock = LeaseTable(), ManualClock()
    lease = _lease(table, clock)
    await lease.claim()
    table.reachable = False
    with pytest.raises(StoreUnavailable):
        await lease.beat()
    table.reachable = True
    await lease.beat()
    clock.now += 20  # no beat since: a stalled process, not an outage
    with pytest.raises(LeaseNotHeld):
        lease.require()


async def test_a_name_taken_over_while_expired_is_given_up_for_a_fresh_slot() -> None:
    table, clock = LeaseTable(), ManualClock()
    lease = _lease(table, clock)
    await lease.claim()
    table.holders["inst/1"] = "someone-else"
    await lease.beat()
    assert lease.require() == "inst/2"

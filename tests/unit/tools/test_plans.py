"""Plan sources: leases, ids, persistence (DESIGN §3)."""

from __future__ import annotations

import pytest

from arvis.domain.ids import PlanId
from arvis.tools import (
    PlanLease,
    PlanMismatch,
    PlanNotFound,
    PlanUnavailable,
    StaticToolPlanSource,
    ToolDispatcher,
    ToolPlan,
    derive_plan_id,
    describe_plan,
    lease_plan,
)
from tests.support.fakes import FakeTool, InMemoryPlanStore, definition, invocation, returns_ok


def dispatcher(*descriptions: str) -> ToolDispatcher:
    return ToolDispatcher(
        [
            FakeTool(definition(f"t{i}", description=d), returns_ok)
            for i, d in enumerate(descriptions)
        ]
    )


def test_plan_id_is_derived_from_the_fingerprints_in_any_order() -> None:
    a, b = definition("a.tool"), definition("b.tool")
    assert derive_plan_id([a, b]) == derive_plan_id([b, a])
    assert len(derive_plan_id([a, b])) == 64


def test_a_plan_id_is_never_reused_for_changed_definitions() -> None:
    before = StaticToolPlanSource(dispatcher("One."))
    after = StaticToolPlanSource(dispatcher("One, changed."))
    assert before.current.plan_id != after.current.plan_id
    assert StaticToolPlanSource(dispatcher("One.")).current.plan_id == before.current.plan_id


def test_a_plan_whose_id_does_not_match_its_definitions_cannot_be_built() -> None:
    d = dispatcher("One.")
    with pytest.raises(PlanMismatch):
        ToolPlan(PlanId("0" * 64), d.definitions, d)


async def test_leasing_the_current_plan_persists_it_once() -> None:
    store = InMemoryPlanStore()
    source = StaticToolPlanSource(dispatcher("One."), store)
    first = await source.lease()
    second = await source.lease(first.plan.plan_id)
    assert first.plan is second.plan
    assert store.saves == 1
    assert store.plans[first.plan.plan_id] == first.plan.records()


async def test_release_is_idempotent_and_counts_once() -> None:
    source = StaticToolPlanSource(dispatcher("One."))
    lease = await source.lease()
    assert source.active_leases == 1
    lease.release()
    lease.release()
    assert source.active_leases == 0
    async with await source.lease() as plan:
        assert plan is source.current
    assert source.active_leases == 0


async def test_an_older_plan_is_leased_from_the_store_and_cannot_dispatch() -> None:
    store = InMemoryPlanStore()
    old = StaticToolPlanSource(dispatcher("One."), store)
    old_id = (await old.lease()).plan.plan_id
    new = StaticToolPlanSource(dispatcher("One, changed."), store)
    lease = await new.lease(old_id)
    assert lease.plan.plan_id == old_id
    assert lease.plan.definitions == old.current.definitions
    outcome = await lease.plan.dispatcher.dispatch(invocation("t0"))
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.effect_started) == ("plan_retired", False)


async def test_an_unknown_plan_id_is_not_found() -> None:
    source = StaticToolPlanSource(dispatcher("One."), InMemoryPlanStore())
    with pytest.raises(PlanNotFound):
        await source.lease(PlanId("f" * 64))


async def test_tampered_stored_definitions_are_refused() -> None:
    store = InMemoryPlanStore()
    old = StaticToolPlanSource(dispatcher("One."), store)
    old_id = (await old.lease()).plan.plan_id
    store.plans[old_id][0]["description"] = "Rewritten after the fact."
    with pytest.raises(PlanMismatch, match="do not verify"):
        await StaticToolPlanSource(dispatcher("Two."), store).lease(old_id)


class RaisingSource:
    async def lease(self, plan_id: PlanId | None = None) -> PlanLease:
        raise RuntimeError("connection string with password")


class WrongPlanSource:
    def __init__(self, inner: StaticToolPlanSource) -> None:
        self.inner = inner
        self.leases: list[PlanLease] = []

    async def lease(self, plan_id: PlanId | None = None) -> PlanLease:
        lease = await self.inner.lease(None)
        self.leases.append(lease)
        return lease


async def test_a_source_that_raises_is_contained_without_its_text() -> None:
    with pytest.raises(PlanUnavailable) as caught:
        await lease_plan(RaisingSource())
    assert "password" not in str(caught.value)


async def test_a_source_returning_the_wrong_plan_has_its_lease_released() -> None:
    source = WrongPlanSource(StaticToolPlanSource(dispatcher("One.")))
    with pytest.raises(PlanMismatch, match="another plan"):
        await lease_plan(source, PlanId("a" * 64))
    assert source.leases[0].released
    assert source.inner.active_leases == 0


async def test_lease_plan_returns_a_verified_lease() -> None:
    source = StaticToolPlanSource(dispatcher("One."))
    lease = await lease_plan(source)
    assert lease.plan.plan_id == source.current.plan_id


def test_describe_plan_lists_schemas_metadata_fingerprints_and_plan_id() -> None:
    source = StaticToolPlanSource(dispatcher("One.", "Two."))
    rows = describe_plan(source.current)
    assert [row["name"] for row in rows] == ["t0", "t1"]
    assert set(rows[0]) == {
        "name",
        "description",
        "input_schema",
        "effect",
        "replay_safety",
        "capabilities",
        "fingerprint",
        "plan_id",
    }
    assert rows[0]["plan_id"] == source.current.plan_id
    assert rows[0]["effect"] == "mutating"
    assert rows[1]["description"] == "Two."
    assert rows[0]["input_schema"] == source.current.definitions["t0"].input_schema

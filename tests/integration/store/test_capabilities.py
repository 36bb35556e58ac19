"""Single use is a conditional UPDATE: a second transition changes nothing."""

from __future__ import annotations

from arvis.domain.ids import CapabilityId, IdempotencyKey, PlanId, RunId, TenantId
from arvis.store.database import PgStore

T = TenantId("acme")
CAP = CapabilityId("cap-1")


async def _minted(store: PgStore) -> None:
    async with store.unit_of_work() as uow:
        await uow.connection.exec_driver_sql(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (repeat('p', 64), '[]') "
            "ON CONFLICT DO NOTHING"
        )
        await uow.runs.create(T, RunId("r"), PlanId("p" * 64))
        await uow.actions.claim(T, IdempotencyKey("k"), RunId("r"), "c", "echo", "d")
        await uow.capabilities.mint(T, CAP, RunId("r"), IdempotencyKey("k"), 1, "manager-a")
        await uow.commit()


async def test_second_consume_of_a_capability_is_rejected(store: PgStore) -> None:
    await _minted(store)
    async with store.unit_of_work() as uow:
        assert await uow.capabilities.activate(T, CAP, 101)
        assert not await uow.capabilities.activate(T, CAP, 102)
        assert not await uow.capabilities.consume(T, CAP, "manager-b")
        assert await uow.capabilities.consume(T, CAP, "manager-a")
        assert not await uow.capabilities.consume(T, CAP, "manager-a")
        assert not await uow.capabilities.revoke(T, CAP, "too late")
        assert await uow.capabilities.state(T, CAP) == "CONSUMED"

"""A unit of work is one transaction that rolls back unless told to commit."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from arvis.store.database import PgStore
from arvis.store.errors import IntegrityConflict

INSERT = text("INSERT INTO tool_plans (plan_id, definitions) VALUES (lpad(:plan, 64, '0'), '[]')")
COUNT = text("SELECT count(*) FROM tool_plans WHERE plan_id = lpad(:plan, 64, '0')")


async def _count(store: PgStore, plan: str) -> int:
    async with store.unit_of_work() as uow:
        return int((await uow.connection.execute(COUNT, {"plan": plan})).scalar_one())


async def test_leaving_without_commit_rolls_back(store: PgStore) -> None:
    async with store.unit_of_work() as uow:
        await uow.connection.execute(INSERT, {"plan": "uncommitted"})
    assert await _count(store, "uncommitted") == 0


async def test_commit_makes_the_write_durable(store: PgStore) -> None:
    async with store.unit_of_work() as uow:
        await uow.connection.execute(INSERT, {"plan": "committed"})
        await uow.commit()
    assert await _count(store, "committed") == 1


async def test_an_exception_rolls_back_and_surfaces_as_a_domain_error(store: PgStore) -> None:
    with pytest.raises(IntegrityConflict) as caught:
        async with store.unit_of_work() as uow:
            await uow.connection.execute(INSERT, {"plan": "dup"})
            await uow.connection.execute(INSERT, {"plan": "dup"})
    assert caught.value.constraint == "pk_tool_plans"
    assert await _count(store, "dup") == 0


async def test_the_store_fingerprint_names_the_database_and_revision(store: PgStore) -> None:
    system_id, revision = store.fingerprint.split(":")
    assert system_id.isdigit()
    assert revision == store.revision

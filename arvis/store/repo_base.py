"""The repositories' shared base: one statement per method on the unit of work's connection."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection


class SqlRepository:
    def __init__(self, connection: AsyncConnection) -> None:
        self._c = connection

    async def _one(self, sql: str, **params: Any) -> RowMapping | None:
        result = await self._c.execute(text(sql), params)
        return result.mappings().first()

    async def _all(self, sql: str, **params: Any) -> list[RowMapping]:
        result = await self._c.execute(text(sql), params)
        return list(result.mappings().all())

    async def _count(self, sql: str, **params: Any) -> int:
        result = await self._c.execute(text(sql), params)
        return int(result.rowcount)

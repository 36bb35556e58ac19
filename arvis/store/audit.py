"""The plan store, and what a declared audit sink's factory receives.

The built-in audit sink is the store itself: the admission statement
(``arvis_admit``) records the intent as the in-flight attempt row and assigns its
receipt's durable position, the run's next receipt number, in the same
statement. A deployment may declare another sink (``[audit] sink``); it records
the intent before the admission statement runs and answers its own receipt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.ids import PlanId
from arvis.store.connections import translated, write


@dataclass(frozen=True)
class AuditHost:
    """What an ``[audit] sink`` factory receives (``arvis.toml``)."""

    store_fingerprint: str
    """What every receipt must name (DESIGN §5)."""
    options: Mapping[str, Any]
    """``[audit.options]``, for the factory to validate."""


class PgPlanStore:
    """Persists plan definitions so an auditor sees what was in force."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def save_plan(self, plan_id: PlanId, definitions: Sequence[dict[str, Any]]) -> None:
        await write(
            self._engine,
            text(
                "INSERT INTO tool_plans (plan_id, definitions) VALUES"
                " (:p, cast(:d AS jsonb)) ON CONFLICT (plan_id) DO NOTHING"
            ),
            {"p": plan_id, "d": json.dumps(list(definitions))},
        )

    async def load_plan(self, plan_id: PlanId) -> list[dict[str, Any]] | None:
        async with translated(self._engine, write=False) as conn:
            result = await conn.execute(
                text("SELECT definitions FROM tool_plans WHERE plan_id = :p"), {"p": plan_id}
            )
            row = result.first()
        return None if row is None else list(row[0])

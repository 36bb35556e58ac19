"""The notification outbox on PostgreSQL (``notify_outbox``, revision 0006).

Rows are written by triggers with the facts they report; this adapter only claims
and settles them for :class:`arvis.lifecycle.consent.notify.NotificationDeliverer`. A claim
moves the rows' next attempt past the time their delivery may take, in one short
statement (``FOR UPDATE SKIP LOCKED``: concurrent deliverers take different rows),
so no transaction is open while a webhook is posted. Its statements are administration
(:mod:`arvis.store.connections`), off the governed path's pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.lifecycle.consent.notify import OutboxEvent
from arvis.store.connections import translated

CLAIM_SQL = text(
    "UPDATE notify_outbox o SET next_attempt_at = now() + make_interval(secs => :hold)"
    " FROM (SELECT tenant_id, event_id FROM notify_outbox"
    "  WHERE state = 'PENDING' AND next_attempt_at <= now()"
    "  ORDER BY next_attempt_at LIMIT :n FOR UPDATE SKIP LOCKED) due"
    " WHERE o.tenant_id = due.tenant_id AND o.event_id = due.event_id"
    " RETURNING o.tenant_id, o.event_id, o.event_type, o.subject, o.occurred_at, o.attempts,"
    " o.delivered_to"
)
SETTLE_SQL = text(
    "UPDATE notify_outbox SET delivered_to = :to, last_error = :error,"
    " attempts = attempts + CASE WHEN :done THEN 0 ELSE 1 END,"
    " state = CASE WHEN :done THEN 'DELIVERED'"
    "   WHEN attempts + 1 >= :max THEN 'DEAD' ELSE 'PENDING' END,"
    " delivered_at = CASE WHEN :done THEN now() END,"
    " next_attempt_at = now() + make_interval(secs => :delay)"
    " WHERE tenant_id = :t AND event_id = :e AND state = 'PENDING'"
)
LIST_SQL = text(
    "SELECT tenant_id, event_id, event_type, state, attempts, delivered_to, last_error,"
    " occurred_at, next_attempt_at, delivered_at FROM notify_outbox"
    " WHERE (cast(:s AS text) IS NULL OR state = :s)"
    " AND (cast(:t AS text) IS NULL OR tenant_id = :t)"
    " ORDER BY occurred_at DESC LIMIT :n"
)
RETRY_SQL = text(
    "UPDATE notify_outbox SET state = 'PENDING', attempts = 0, next_attempt_at = now()"
    " WHERE state = 'DEAD' AND (cast(:t AS text) IS NULL OR tenant_id = :t)"
)


class PgOutbox:
    """Claims and settles outbox rows, and shows them to an operator."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def claim(self, *, limit: int, hold_s: float) -> list[OutboxEvent]:
        async with translated(self._engine, write=True) as conn:
            rows = (await conn.execute(CLAIM_SQL, {"hold": hold_s, "n": limit})).mappings().all()
        return [
            OutboxEvent(**{**row, "delivered_to": tuple(row["delivered_to"])})
            for row in sorted(rows, key=lambda row: row["occurred_at"])
        ]

    async def settle(
        self,
        event: OutboxEvent,
        *,
        delivered_to: Sequence[str],
        done: bool,
        retry_in_s: float,
        max_attempts: int,
        error: str | None,
    ) -> None:
        async with translated(self._engine, write=True) as conn:
            await conn.execute(
                SETTLE_SQL,
                {
                    "to": list(delivered_to),
                    "error": error,
                    "done": done,
                    "max": max_attempts,
                    "delay": retry_in_s,
                    "t": event.tenant_id,
                    "e": event.event_id,
                },
            )

    async def list(
        self, *, state: str | None = None, tenant_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Events for an operator's view, newest first."""
        async with translated(self._engine, write=False) as conn:
            result = await conn.execute(LIST_SQL, {"s": state, "t": tenant_id, "n": limit})
            return [dict(row) for row in result.mappings().all()]

    async def retry_dead(self, *, tenant_id: str | None = None) -> int:
        """Give DEAD events a fresh round of attempts (after the receiver is fixed)."""
        async with translated(self._engine, write=True) as conn:
            result = await conn.execute(RETRY_SQL, {"t": tenant_id})
        return int(result.rowcount)

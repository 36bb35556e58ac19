"""The notification outbox on PostgreSQL (``notify_outbox``, revision 0006).

Rows are written by triggers with the facts they report; this adapter only claims
and settles them for :class:`arvis.lifecycle.consent.notify.NotificationDeliverer`. A claim
moves the rows' next attempt past the time their delivery may take, in one short
statement (``FOR UPDATE SKIP LOCKED``: concurrent deliverers take different rows),
so no transaction is open while a webhook is posted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.rows import dict_row

from arvis.lifecycle.consent.notify import OutboxEvent
from arvis.store.operations import PgOperations

CLAIM_SQL = (
    "UPDATE notify_outbox o SET next_attempt_at = now() + make_interval(secs => %s)"
    " FROM (SELECT tenant_id, event_id FROM notify_outbox"
    "  WHERE state = 'PENDING' AND next_attempt_at <= now()"
    "  ORDER BY next_attempt_at LIMIT %s FOR UPDATE SKIP LOCKED) due"
    " WHERE o.tenant_id = due.tenant_id AND o.event_id = due.event_id"
    " RETURNING o.tenant_id, o.event_id, o.event_type, o.subject, o.occurred_at, o.attempts,"
    " o.delivered_to"
)
SETTLE_SQL = (
    "UPDATE notify_outbox SET delivered_to = %(to)s, last_error = %(error)s,"
    " attempts = attempts + CASE WHEN %(done)s THEN 0 ELSE 1 END,"
    " state = CASE WHEN %(done)s THEN 'DELIVERED'"
    "   WHEN attempts + 1 >= %(max)s THEN 'DEAD' ELSE 'PENDING' END,"
    " delivered_at = CASE WHEN %(done)s THEN now() END,"
    " next_attempt_at = now() + make_interval(secs => %(delay)s)"
    " WHERE tenant_id = %(t)s AND event_id = %(e)s AND state = 'PENDING'"
)
LIST_SQL = (
    "SELECT tenant_id, event_id, event_type, state, attempts, delivered_to, last_error,"
    " occurred_at, next_attempt_at, delivered_at FROM notify_outbox"
    " WHERE (%(s)s::text IS NULL OR state = %(s)s) AND (%(t)s::text IS NULL OR tenant_id = %(t)s)"
    " ORDER BY occurred_at DESC LIMIT %(n)s"
)
RETRY_SQL = (
    "UPDATE notify_outbox SET state = 'PENDING', attempts = 0, next_attempt_at = now()"
    " WHERE state = 'DEAD' AND (%(t)s::text IS NULL OR tenant_id = %(t)s)"
)


class PgOutbox:
    """Claims and settles outbox rows on the lifecycle's pool."""

    def __init__(self, ops: PgOperations) -> None:
        self.ops = ops

    async def claim(self, *, limit: int, hold_s: float) -> list[OutboxEvent]:
        async with self.ops._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(CLAIM_SQL, (hold_s, limit))
            rows = await cursor.fetchall()
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
        async with self.ops._connection() as conn:
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
        async with self.ops._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(LIST_SQL, {"s": state, "t": tenant_id, "n": limit})
            return list(await cursor.fetchall())

    async def retry_dead(self, *, tenant_id: str | None = None) -> int:
        """Give DEAD events a fresh round of attempts (after the receiver is fixed)."""
        async with self.ops._connection() as conn:
            cursor = await conn.execute(RETRY_SQL, {"t": tenant_id})
            return cursor.rowcount

"""The notification outbox on PostgreSQL (``notify_outbox``, revision 0006).

Rows are written by triggers with the facts they report; this adapter only claims
and settles them for :class:`arvis.lifecycle.consent.notify.NotificationDeliverer`. A claim
reads the due rows, then moves their next attempt past the time their delivery may
take with a conditional update per tenant (``WHERE`` the row is still due): of
concurrent deliverers, the one whose update lands first takes a row, the other's
update finds it no longer due. Each is a short statement of its own, so no
transaction is open while a webhook is posted, and nothing locks rows across shards
(Citus refuses ``FOR UPDATE`` on a query over a distributed table's shards, issue 28).
Its statements are administration (:mod:`arvis.store.connections`), off the governed
path's pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.lifecycle.consent.notify import OutboxEvent
from arvis.store.connections import rows, translated, write

_DUE = "state = 'PENDING' AND next_attempt_at <= now()"
DUE_SQL = text(
    f"SELECT tenant_id, event_id FROM notify_outbox WHERE {_DUE} ORDER BY next_attempt_at LIMIT :n"
)
CLAIM_SQL = text(
    "UPDATE notify_outbox SET next_attempt_at = now() + make_interval(secs => :hold)"
    f" WHERE tenant_id = :t AND event_id = ANY(:e) AND {_DUE}"
    " RETURNING tenant_id, event_id, event_type, subject, occurred_at, attempts, delivered_to"
)
# Delivered, or not yet: two statements, since Citus refuses now() inside a CASE.
_SETTLED = (
    "UPDATE notify_outbox SET delivered_to = :to, last_error = :error, {changes},"
    " next_attempt_at = now() + make_interval(secs => :delay)"
    " WHERE tenant_id = :t AND event_id = :e AND state = 'PENDING'"
)
SETTLE_SQL = {
    True: text(_SETTLED.format(changes="state = 'DELIVERED', delivered_at = now()")),
    False: text(
        _SETTLED.format(
            changes="attempts = attempts + 1,"
            " state = CASE WHEN attempts + 1 >= :max THEN 'DEAD' ELSE 'PENDING' END"
        )
    ),
}
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
        async with translated(self._engine, write=False) as conn:
            due = (await conn.execute(DUE_SQL, {"n": limit})).all()
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, event_id in due:
            by_tenant.setdefault(tenant_id, []).append(event_id)
        rows: list[Any] = []
        for tenant_id, event_ids in by_tenant.items():
            async with translated(self._engine, write=True) as conn:
                claimed = await conn.execute(
                    CLAIM_SQL, {"hold": hold_s, "t": tenant_id, "e": event_ids}
                )
                rows.extend(claimed.mappings().all())
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
        await write(
            self._engine,
            SETTLE_SQL[done],
            {
                "to": list(delivered_to),
                "error": error,
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
        found = await rows(self._engine, LIST_SQL, {"s": state, "t": tenant_id, "n": limit})
        return [dict(row) for row in found]

    async def retry_dead(self, *, tenant_id: str | None = None) -> int:
        """Give DEAD events a fresh round of attempts (after the receiver is fixed)."""
        result = await write(self._engine, RETRY_SQL, {"t": tenant_id})
        return int(result.rowcount)

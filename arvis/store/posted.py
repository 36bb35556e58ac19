"""Where consent requests were posted in Slack (``slack_messages``, revision 0018): what
the Slack destination reads before it posts or updates (:mod:`arvis.lifecycle.consent.posted`).

Each call is one short statement of a tenant's rows (one shard on Citus). They are
administration (:mod:`arvis.store.connections`),
run by the outbox's deliverer in the background, off the governed path's pool.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.ids import ConfirmationId, TenantId
from arvis.lifecycle.consent.posted import PostedMessage
from arvis.store.connections import translated, write

FIND_SQL = text(
    "SELECT round, channel, message_ts, extract(epoch FROM now() - posting_at)::float8 AS age_s"
    " FROM slack_messages WHERE tenant_id = :t AND confirmation_id = :c"
)
# A post begins: a new row, or a later round's post over an earlier round's message, or
# this round's post again when its answer never came. A message this round already has
# stays (the upsert's condition): its redelivered request is not posted twice.
BEGIN_SQL = text(
    "INSERT INTO slack_messages (tenant_id, confirmation_id, round, channel)"
    " VALUES (:t, :c, :r, :channel)"
    " ON CONFLICT (tenant_id, confirmation_id) DO UPDATE"
    " SET round = excluded.round, channel = excluded.channel, message_ts = NULL,"
    " posted_at = NULL, posting_at = excluded.posting_at"
    " WHERE slack_messages.round < excluded.round"
    " OR (slack_messages.round = excluded.round AND slack_messages.message_ts IS NULL)"
)
POSTED_SQL = text(
    "UPDATE slack_messages SET message_ts = :ts, posted_at = now()"
    " WHERE tenant_id = :t AND confirmation_id = :c AND round = :r"
)


class PgPostedMessages:
    """:class:`arvis.lifecycle.consent.posted.PostedMessages` on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def find(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> PostedMessage | None:
        async with translated(self._engine, write=False) as conn:
            row = (await conn.execute(FIND_SQL, {"t": tenant_id, "c": confirmation_id})).first()
        if row is None:
            return None
        return PostedMessage(
            round=row.round, channel=row.channel, ts=row.message_ts, posting_age_s=row.age_s
        )

    async def begin(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, round: int, channel: str
    ) -> None:
        params = {"t": tenant_id, "c": confirmation_id, "r": round, "channel": channel}
        await write(self._engine, BEGIN_SQL, params)

    async def posted(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, round: int, ts: str
    ) -> None:
        params = {"t": tenant_id, "c": confirmation_id, "r": round, "ts": ts}
        await write(self._engine, POSTED_SQL, params)

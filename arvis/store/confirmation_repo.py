"""Confirmations on PostgreSQL: consent per idempotency key, one statement per method."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy.engine import RowMapping

from arvis.domain.ids import ConfirmationId, IdempotencyKey, TenantId
from arvis.lifecycle.ports import ConfirmationRecord
from arvis.store.repo_base import SqlRepository


def _confirmation(row: RowMapping) -> ConfirmationRecord:
    return ConfirmationRecord(
        confirmation_id=row["confirmation_id"],
        tenant_id=row["tenant_id"],
        run_id=row["run_id"],
        causal_id=row["causal_id"],
        idempotency_key=row["idempotency_key"],
        tool=row["tool"],
        payload=row["payload"],
        state=row["state"],
        context=row["context"],
        decided_by=row["decided_by"],
        decision_reason=row["decision_reason"],
        decided_at=row["decided_at"],
        expires_at=row["expires_at"],
        created_at=row["created_at"],
    )


_CONFIRMATION_COLUMNS = (
    "confirmation_id, tenant_id, run_id, causal_id, idempotency_key, tool, payload, state,"
    " context, decided_by, decision_reason, decided_at, expires_at, created_at"
)


class PgConfirmationRepository(SqlRepository):
    async def get(
        self, tenant_id: TenantId, key: IdempotencyKey, *, for_update: bool
    ) -> ConfirmationRecord | None:
        lock = " FOR UPDATE" if for_update else ""
        row = await self._one(
            f"SELECT {_CONFIRMATION_COLUMNS} FROM confirmations"
            f" WHERE tenant_id = :t AND idempotency_key = :k{lock}",
            t=tenant_id,
            k=key,
        )
        return None if row is None else _confirmation(row)

    async def by_id(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, *, for_update: bool
    ) -> ConfirmationRecord | None:
        lock = " FOR UPDATE" if for_update else ""
        row = await self._one(
            f"SELECT {_CONFIRMATION_COLUMNS} FROM confirmations"
            f" WHERE tenant_id = :t AND confirmation_id = :id{lock}",
            t=tenant_id,
            id=confirmation_id,
        )
        return None if row is None else _confirmation(row)

    async def create_pending(
        self, record: ConfirmationRecord, payload_digest: str
    ) -> ConfirmationRecord:
        row = await self._one(
            "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
            " idempotency_key, tool, payload_digest, payload, state, context, expires_at,"
            " created_at, updated_at)"
            " VALUES (:t, :id, :r, :c, :k, :tool, :d, cast(:payload AS jsonb), 'PENDING',"
            " cast(:ctx AS jsonb), :exp, :now, :now)"
            f" RETURNING {_CONFIRMATION_COLUMNS}",
            t=record.tenant_id,
            id=record.confirmation_id,
            r=record.run_id,
            c=record.causal_id,
            k=record.idempotency_key,
            tool=record.tool,
            d=payload_digest,
            payload=json.dumps(record.payload),
            ctx=json.dumps(record.context),
            exp=record.expires_at,
            now=record.created_at,
        )
        assert row is not None
        return _confirmation(row)

    async def transition(
        self,
        tenant_id: TenantId,
        confirmation_id: ConfirmationId,
        from_states: tuple[str, ...],
        to_state: str,
        *,
        decided_by: str | None = None,
        reason: str | None = None,
        decided_at: datetime | None = None,
    ) -> bool:
        return (
            await self._count(
                "UPDATE confirmations SET state = :to, updated_at = now(),"
                " decided_by = coalesce(:by, decided_by),"
                " decision_reason = coalesce(:why, decision_reason),"
                " decided_at = coalesce(:at, decided_at)"
                " WHERE tenant_id = :t AND confirmation_id = :id AND state = ANY(:from_)",
                to=to_state,
                by=decided_by,
                why=reason,
                at=decided_at,
                t=tenant_id,
                id=confirmation_id,
                from_=list(from_states),
            )
            == 1
        )

    async def list(
        self, tenant_id: TenantId, state: str | None, limit: int, after: str | None
    ) -> list[ConfirmationRecord]:
        rows = await self._all(
            f"SELECT {_CONFIRMATION_COLUMNS} FROM confirmations WHERE tenant_id = :t"
            " AND (cast(:s AS text) IS NULL OR state = :s)"
            " AND (cast(:after AS text) IS NULL OR confirmation_id > :after)"
            " ORDER BY confirmation_id LIMIT :n",
            t=tenant_id,
            s=state,
            after=after,
            n=limit,
        )
        return [_confirmation(row) for row in rows]

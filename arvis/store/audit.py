"""The PostgreSQL audit sink and plan store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.ids import PlanId
from arvis.lifecycle.ports import LifecycleUnitOfWork
from arvis.store.errors import translate
from arvis.store.uow import PgUnitOfWork


class PgAuditSink:
    """Writes the intent in the admission transaction; its row is the receipt.

    The durable position comes from a global sequence, so it is never reused,
    and it becomes durable exactly when the admission commits.
    """

    def __init__(self, store_fingerprint: str) -> None:
        self.store_fingerprint = store_fingerprint

    async def record(self, uow: LifecycleUnitOfWork, intent: Intent) -> AuditReceipt:
        if not isinstance(uow, PgUnitOfWork):
            raise TypeError("PgAuditSink records through a PostgreSQL unit of work")
        context = intent.context
        commitment = intent.commitment
        # A lost connection here is a store outage, not a faulty sink: say so.
        try:
            result = await uow.connection.execute(
                text(
                    "INSERT INTO intents (tenant_id, intent_id, run_id, causal_id, idempotency_key,"
                    " attempt, tool, plan_id, payload, payload_digest, capability_id, commitment,"
                    " receipt_position, context, instance_id, confirmation_id) VALUES (:t, :i, :r,"
                    " :c, :k, :a, :tool, :plan, cast(:payload AS jsonb), :d, :cap, :commitment,"
                    " nextval('receipt_position_seq'), cast(:ctx AS jsonb), :inst, :conf)"
                    " RETURNING receipt_position"
                ),
                {
                    "t": context.tenant_id,
                    "i": intent.intent_id,
                    "r": context.run_id,
                    "c": context.causal_id,
                    "k": intent.idempotency_key,
                    "a": intent.attempt,
                    "tool": intent.tool,
                    "plan": intent.plan_id,
                    "payload": intent.payload.canonical.decode(),
                    "d": intent.payload.digest,
                    "cap": intent.capability_id,
                    "commitment": commitment,
                    "ctx": context.model_dump_json(),
                    "inst": context.instance_id,
                    "conf": intent.confirmation_id,
                },
            )
        except Exception as exc:
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise
        position = int(result.scalar_one())
        return AuditReceipt(
            intent_commitment=commitment,
            run_id=context.run_id,
            causal_id=context.causal_id,
            position=position,
            store_fingerprint=self.store_fingerprint,
        )


@dataclass(frozen=True)
class AuditHost:
    """What an ``[audit] sink`` factory receives (``arvis.toml``)."""

    store_fingerprint: str
    """What every receipt must name (DESIGN §5)."""
    default: PgAuditSink
    """The built-in sink, for a sink that records in PostgreSQL and elsewhere too."""
    options: Mapping[str, Any]
    """``[audit.options]``, for the factory to validate."""


class PgPlanStore:
    """Persists plan definitions so an auditor sees what was in force."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def save_plan(self, plan_id: PlanId, definitions: Sequence[dict[str, Any]]) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO tool_plans (plan_id, definitions) VALUES"
                        " (:p, cast(:d AS jsonb)) ON CONFLICT (plan_id) DO NOTHING"
                    ),
                    {"p": plan_id, "d": json.dumps(list(definitions))},
                )
        except Exception as exc:
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise

    async def load_plan(self, plan_id: PlanId) -> list[dict[str, Any]] | None:
        try:
            async with self._engine.connect() as conn:
                result = await conn.execute(
                    text("SELECT definitions FROM tool_plans WHERE plan_id = :p"), {"p": plan_id}
                )
                row = result.first()
        except Exception as exc:
            domain = translate(exc)
            if domain is not None:
                raise domain from exc
            raise
        return None if row is None else list(row[0])

"""The lifecycle's write steps on PostgreSQL: each one statement, one round trip, one commit.

The statements call the server-side functions of ``arvis/store/sql/`` (one file
per function, their current text) on a psycopg pool of autocommit connections
with prepared statements (:mod:`arvis.store.pool`): a statement is its own
transaction. Nothing here decides anything; :mod:`arvis.lifecycle` does, and this
module only writes what it was told, answering the store's own checks as statuses.
The steps that append to a chain are :mod:`arvis.store.journaling`'s; this module
adds admission, consent, the decision's history, recovery's reads and the leases.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.lifecycle.policy.budgets import charges_text
from arvis.lifecycle.records import (
    ConfirmationRecord,
    DecisionHistory,
    InFlightAttempt,
    LatestAttempt,
    UncertainAttempt,
)
from arvis.lifecycle.writes import Admission, AdmitAnswer, ConsentAnswer, ConsentRequest
from arvis.store.batching import GroupCommit
from arvis.store.journaling import PgJournal
from arvis.store.reads import confirmation_from, uncertain_from
from arvis.store.statements import (
    ADMIT_SQL,
    BEAT_LEASE_SQL,
    CLAIM_LEASE_SQL,
    CONSENT_SQL,
    EXPIRABLE_SQL,
    HISTORY_SQL,
    IN_FLIGHT_SQL,
    LIVE_LEASES_SQL,
    MARK_STARTED_SQL,
    OPEN_UNCERTAIN_SQL,
    RECORD_ASK_SQL,
    RELEASE_LEASE_SQL,
)


class PgOperations(PgJournal):
    """The write steps and the reads of the lifecycle, on one pool."""

    # -- the write steps ----------------------------------------------------

    def __init__(self, pool: AsyncConnectionPool, fingerprint: str) -> None:
        super().__init__(pool, fingerprint)
        self.admissions: GroupCommit[str] = GroupCommit(partial(self._batch, ADMIT_SQL))
        """The one admission path: each tenant's admissions, batched (issue 25)."""

    async def admit(self, admission: Admission) -> AdmitAnswer:
        status, position, plan, budget = await self.admissions.submit(
            admission.intent.context.tenant_id,
            admit_item(admission),
            charged=bool(admission.charges),
        )
        return AdmitAnswer(status=status, receipt_position=position, run_plan=plan, budget=budget)

    async def request_consent(self, request: ConsentRequest) -> ConsentAnswer:
        record = request.confirmation
        status, confirmation_id, plan = await self._row(
            CONSENT_SQL,
            (
                record.tenant_id,
                record.run_id,
                request.plan_id,
                record.causal_id,
                record.idempotency_key,
                record.tool,
                request.payload_digest,
                record.confirmation_id,
                request.payload_text,
                json.dumps(record.context),
                record.expires_at,
                record.created_at,
                json.dumps(
                    {
                        "approver_groups": list(record.approver_groups),
                        "quorum": record.quorum,
                        "definition_fingerprint": record.definition_fingerprint,
                        "policy_digest": record.policy_digest,
                        **(
                            {}
                            if record.policy is None
                            else {"policy": record.policy.model_dump(mode="json")}
                        ),
                    }
                ),
            ),
        )
        return ConsentAnswer(status=status, confirmation_id=confirmation_id, run_plan=plan)

    async def history(
        self, tenant_id: TenantId, run_id: RunId, causal_id: str, key: IdempotencyKey
    ) -> DecisionHistory:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(
                HISTORY_SQL, {"t": tenant_id, "r": run_id, "c": causal_id, "k": key}
            )
            row = await cursor.fetchone()
        assert row is not None
        latest = (
            None
            if row["attempt"] is None
            else LatestAttempt(
                attempt=row["attempt"],
                boundary=EffectBoundary(row["boundary"]),
                retryable=row["retryable"],
                position=row["position"],
                resolved=None if row["resolved"] is None else EffectBoundary(row["resolved"]),
                resolution_position=row["resolution_position"],
                plan_id=row["plan_id"],
            )
        )
        confirmation = (
            None
            if row["confirmation_id"] is None
            else confirmation_from(
                {key[2:]: value for key, value in row.items() if key.startswith("c_")}
                | {"confirmation_id": row["confirmation_id"], "read_at": row["read_at"]}
            )
        )
        return DecisionHistory(
            bound_key=row["bound_key"],
            latest=latest,
            in_flight=row["in_flight"],
            confirmation=confirmation,
            read_at=row["read_at"],
            owner=row["owner"],
        )

    async def open_uncertain(self, *, limit: int, max_asks: int) -> list[UncertainAttempt]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(OPEN_UNCERTAIN_SQL, (max_asks, limit))
            rows = await cursor.fetchall()
        return [uncertain_from(row) for row in rows]

    async def record_ask(
        self, tenant_id: TenantId, key: str, attempt: int, next_in_s: float
    ) -> None:
        await self._count(RECORD_ASK_SQL, (next_in_s, tenant_id, key, attempt))

    async def expirable(self, *, limit: int) -> list[ConfirmationRecord]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(EXPIRABLE_SQL, (limit,))
            rows = await cursor.fetchall()
        return [confirmation_from(row) for row in rows]

    async def mark_started(self, tenant_id: TenantId, key: IdempotencyKey, attempt: int) -> None:
        await self._count(MARK_STARTED_SQL, (tenant_id, key, attempt))

    async def in_flight(self, *, limit: int, owner: str | None = None) -> list[InFlightAttempt]:
        if owner is None:
            return await self._attempts(IN_FLIGHT_SQL["abandoned"], (limit,))
        return await self._attempts(IN_FLIGHT_SQL["owner"], (owner, limit))

    async def attempt(self, tenant_id: TenantId, key: IdempotencyKey) -> InFlightAttempt | None:
        found = await self._attempts(IN_FLIGHT_SQL["key"], (tenant_id, key))
        return found[0] if found else None

    async def _attempts(self, sql: str, params: tuple[Any, ...]) -> list[InFlightAttempt]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(sql, params)
            rows = await cursor.fetchall()
        return [InFlightAttempt(**row) for row in rows]

    # -- leases ------------------------------------------------------------

    async def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        async with self._connection() as conn:
            cursor = await conn.execute(CLAIM_LEASE_SQL, {"n": name, "h": holder, "ttl": ttl_s})
            return await cursor.fetchone() is not None

    async def beat_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        return await self._count(BEAT_LEASE_SQL, {"n": name, "h": holder, "ttl": ttl_s}) == 1

    async def release_lease(self, name: str, holder: str) -> bool:
        return await self._count(RELEASE_LEASE_SQL, (name, holder)) == 1

    async def live_leases(self, instance_id: str) -> list[tuple[str, str]]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(LIVE_LEASES_SQL, (instance_id + "/",))
            return [(str(name), str(holder)) for name, holder in await cursor.fetchall()]


def admit_item(admission: Admission) -> str:
    """``admission`` as one item of ``arvis_admit_batch``: ``arvis_admit``'s arguments
    by name, but the tenant (the batch's)."""
    intent = admission.intent
    context = intent.context
    receipt = admission.receipt
    policy = admission.policy
    return json.dumps(
        {
            "run": context.run_id,
            "plan": intent.plan_id,
            "causal": context.causal_id,
            "idempotency_key": intent.idempotency_key,
            "tool": intent.tool,
            "digest": intent.payload.digest,
            "attempt": intent.attempt,
            "intent": intent.intent_id,
            "capability": intent.capability_id,
            "payload": admission.payload_text,
            "commitment": admission.commitment,
            "context": context.model_dump_json(),
            "owner": context.instance_id,
            "confirmation": intent.confirmation_id,
            "reserve": admission.reserve,
            "receipt_position": None if receipt is None else receipt.position,
            "policy": None if policy is None else policy.model_dump_json(),
            "budgets": charges_text(admission.charges),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )

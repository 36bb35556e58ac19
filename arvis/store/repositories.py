"""The lifecycle's repositories on PostgreSQL: runs, actions, capabilities, intents,
leases. One statement per method.

Plain SQL through SQLAlchemy Core on the unit of work's connection: no ORM
identity map, no lazy loads, nothing between the lifecycle and the statement.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import (
    CapabilityId,
    IdempotencyKey,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)
from arvis.lifecycle.ports import (
    ActionRecord,
    CausalIdConflict,
    RunRecord,
    UnsettledIntent,
)
from arvis.store.repo_base import SqlRepository

GENESIS = "0" * 64


def _constraint(exc: IntegrityError) -> str | None:
    diag = getattr(exc.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    return name if isinstance(name, str) else None


def _run(row: RowMapping) -> RunRecord:
    return RunRecord(
        tenant_id=row["tenant_id"],
        run_id=row["run_id"],
        plan_id=row["plan_id"],
        journal_length=row["journal_length"],
        journal_head=row["journal_head"],
        audit_incomplete=row["audit_incomplete"],
    )


_RUN_COLUMNS = "tenant_id, run_id, plan_id, journal_length, journal_head, audit_incomplete"


class PgRunRepository(SqlRepository):
    async def get(self, tenant_id: TenantId, run_id: RunId) -> RunRecord | None:
        row = await self._one(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE tenant_id = :t AND run_id = :r",
            t=tenant_id,
            r=run_id,
        )
        return None if row is None else _run(row)

    async def create(self, tenant_id: TenantId, run_id: RunId, plan_id: PlanId) -> RunRecord:
        row = await self._one(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head) "
            "VALUES (:t, :r, :p, :g) ON CONFLICT (tenant_id, run_id) DO NOTHING "
            f"RETURNING {_RUN_COLUMNS}",
            t=tenant_id,
            r=run_id,
            p=plan_id,
            g=GENESIS,
        )
        if row is None:  # created concurrently: the first binding wins
            existing = await self.get(tenant_id, run_id)
            assert existing is not None
            return existing
        return _run(row)

    async def lock(self, tenant_id: TenantId, run_id: RunId) -> RunRecord:
        row = await self._one(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE tenant_id = :t AND run_id = :r FOR UPDATE",
            t=tenant_id,
            r=run_id,
        )
        if row is None:
            raise LookupError(f"run {run_id} does not exist")
        return _run(row)

    async def advance(self, tenant_id: TenantId, run_id: RunId, length: int, head: str) -> None:
        await self._c.execute(
            text(
                "UPDATE runs SET journal_length = :n, journal_head = :h "
                "WHERE tenant_id = :t AND run_id = :r"
            ),
            {"n": length, "h": head, "t": tenant_id, "r": run_id},
        )

    async def flag_audit_incomplete(self, tenant_id: TenantId, run_id: RunId, reason: str) -> None:
        await self._c.execute(
            text(
                "UPDATE runs SET audit_incomplete = true, audit_incomplete_reason = "
                "coalesce(audit_incomplete_reason || '; ', '') || :why "
                "WHERE tenant_id = :t AND run_id = :r"
            ),
            {"why": reason, "t": tenant_id, "r": run_id},
        )


def _action(row: RowMapping) -> ActionRecord:
    boundary = row["last_boundary"]
    return ActionRecord(
        idempotency_key=row["idempotency_key"],
        run_id=row["run_id"],
        causal_id=row["causal_id"],
        tool=row["tool"],
        attempts=row["attempts"],
        in_flight=row["in_flight"],
        last_boundary=None if boundary is None else EffectBoundary(boundary),
        last_retryable=row["last_retryable"],
        last_position=row["last_position"],
    )


_ACTION_COLUMNS = (
    "idempotency_key, run_id, causal_id, tool, attempts, in_flight, last_boundary, "
    "last_retryable, last_position"
)


class PgActionRepository(SqlRepository):
    async def claim(
        self,
        tenant_id: TenantId,
        key: IdempotencyKey,
        run_id: RunId,
        causal_id: str,
        tool: str,
        payload_digest: str,
    ) -> ActionRecord:
        # Insert-or-lock in one statement: the no-op DO UPDATE takes the row lock
        # that serialises concurrent admissions of one key and returns the row.
        # Another decision under the same causal id violates the other unique
        # constraint instead, which aborts the transaction: CausalIdConflict.
        try:
            row = await self._one(
                "INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool,"
                " payload_digest, attempts, in_flight)"
                " VALUES (:t, :k, :r, :c, :tool, :d, 0, false)"
                " ON CONFLICT (tenant_id, idempotency_key)"
                " DO UPDATE SET updated_at = actions.updated_at"
                f" RETURNING {_ACTION_COLUMNS}",
                t=tenant_id,
                k=key,
                r=run_id,
                c=causal_id,
                tool=tool,
                d=payload_digest,
            )
        except IntegrityError as exc:
            if _constraint(exc) == "uq_actions_run_id_causal_id_tenant_id":
                raise CausalIdConflict(run_id, causal_id) from exc
            raise
        assert row is not None
        return _action(row)

    async def get(self, tenant_id: TenantId, key: IdempotencyKey) -> ActionRecord | None:
        row = await self._one(
            f"SELECT {_ACTION_COLUMNS} FROM actions WHERE tenant_id = :t AND idempotency_key = :k",
            t=tenant_id,
            k=key,
        )
        return None if row is None else _action(row)

    async def begin_attempt(self, tenant_id: TenantId, key: IdempotencyKey, attempt: int) -> None:
        await self._c.execute(
            text(
                "UPDATE actions SET attempts = :a, in_flight = true, updated_at = now() "
                "WHERE tenant_id = :t AND idempotency_key = :k"
            ),
            {"a": attempt, "t": tenant_id, "k": key},
        )

    async def record_refusal(
        self, tenant_id: TenantId, key: IdempotencyKey, attempt: int, position: int
    ) -> None:
        await self._c.execute(
            text(
                "UPDATE actions SET attempts = :a, in_flight = false, "
                "last_boundary = 'PRE_EFFECT_REFUSAL', last_retryable = true, "
                "last_position = :p, updated_at = now() "
                "WHERE tenant_id = :t AND idempotency_key = :k"
            ),
            {"a": attempt, "p": position, "t": tenant_id, "k": key},
        )

    async def settle(
        self,
        tenant_id: TenantId,
        key: IdempotencyKey,
        attempt: int,
        boundary: EffectBoundary,
        retryable: bool,
        position: int,
    ) -> None:
        await self._c.execute(
            text(
                "UPDATE actions SET in_flight = false, last_boundary = :b, "
                "last_retryable = :rt, last_position = :p, updated_at = now() "
                "WHERE tenant_id = :t AND idempotency_key = :k AND attempts = :a"
            ),
            {
                "b": boundary.value,
                "rt": retryable,
                "p": position,
                "t": tenant_id,
                "k": key,
                "a": attempt,
            },
        )


class PgCapabilityRepository(SqlRepository):
    async def mint(
        self,
        tenant_id: TenantId,
        capability_id: CapabilityId,
        run_id: RunId,
        key: IdempotencyKey,
        attempt: int,
        manager_id: str,
    ) -> None:
        await self._c.execute(
            text(
                "INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key,"
                " attempt, manager_id, state) VALUES (:t, :id, :r, :k, :a, :m, 'MINTED')"
            ),
            {
                "t": tenant_id,
                "id": capability_id,
                "r": run_id,
                "k": key,
                "a": attempt,
                "m": manager_id,
            },
        )

    async def activate(
        self, tenant_id: TenantId, capability_id: CapabilityId, receipt_position: int
    ) -> bool:
        return (
            await self._count(
                "UPDATE capabilities SET state = 'ACTIVE', receipt_position = :pos, "
                "updated_at = now() WHERE tenant_id = :t AND capability_id = :id "
                "AND state = 'MINTED'",
                pos=receipt_position,
                t=tenant_id,
                id=capability_id,
            )
            == 1
        )

    async def consume(
        self, tenant_id: TenantId, capability_id: CapabilityId, manager_id: str
    ) -> bool:
        return (
            await self._count(
                "UPDATE capabilities SET state = 'CONSUMED', updated_at = now() "
                "WHERE tenant_id = :t AND capability_id = :id AND state = 'ACTIVE' "
                "AND manager_id = :m",
                t=tenant_id,
                id=capability_id,
                m=manager_id,
            )
            == 1
        )

    async def revoke(self, tenant_id: TenantId, capability_id: CapabilityId, reason: str) -> bool:
        return (
            await self._count(
                "UPDATE capabilities SET state = 'REVOKED', revoke_reason = :why, "
                "updated_at = now() WHERE tenant_id = :t AND capability_id = :id "
                "AND state IN ('MINTED', 'ACTIVE')",
                why=reason,
                t=tenant_id,
                id=capability_id,
            )
            == 1
        )

    async def state(self, tenant_id: TenantId, capability_id: CapabilityId) -> str | None:
        row = await self._one(
            "SELECT state FROM capabilities WHERE tenant_id = :t AND capability_id = :id",
            t=tenant_id,
            id=capability_id,
        )
        return None if row is None else str(row["state"])


class PgIntentRepository(SqlRepository):
    async def settle(
        self, tenant_id: TenantId, intent_id: IntentId, boundary: EffectBoundary
    ) -> bool:
        return (
            await self._count(
                "UPDATE intents SET settled = true, settled_at = now(), boundary = :b "
                # settled_at IS NULL, not NOT settled: see arvis/migrations/sql/0003_functions.sql
                "WHERE tenant_id = :t AND intent_id = :i AND settled_at IS NULL",
                b=boundary.value,
                t=tenant_id,
                i=intent_id,
            )
            == 1
        )

    async def unsettled(
        self,
        *,
        limit: int,
        owner: str | None = None,
        intent: tuple[TenantId, IntentId] | None = None,
    ) -> list[UnsettledIntent]:
        tenant, intent_id = intent if intent is not None else (None, None)
        if intent is not None:
            owner_filter = " AND i.tenant_id = :t AND i.intent_id = :i"
        elif owner is not None:
            owner_filter = " AND i.instance_id = :owner"
        else:
            owner_filter = (
                " AND NOT EXISTS (SELECT 1 FROM instance_leases l"
                " WHERE l.instance_id = i.instance_id AND NOT l.released"
                " AND l.expires_at > now())"
            )
        rows = await self._all(
            "SELECT i.tenant_id, i.intent_id, i.run_id, i.causal_id, i.idempotency_key,"
            " i.attempt, i.tool, i.capability_id, i.confirmation_id, i.commitment,"
            " i.receipt_position, i.instance_id, i.started_at IS NOT NULL AS started"
            f" FROM intents i WHERE NOT i.settled{owner_filter}"
            " ORDER BY i.created_at LIMIT :n FOR UPDATE SKIP LOCKED",
            n=limit,
            owner=owner,
            t=tenant,
            i=intent_id,
        )
        return [UnsettledIntent(**dict(row)) for row in rows]

    async def run_of(self, tenant_id: TenantId, intent_id: IntentId) -> RunId | None:
        row = await self._one(
            "SELECT run_id FROM intents WHERE tenant_id = :t AND intent_id = :i",
            t=tenant_id,
            i=intent_id,
        )
        return None if row is None else RunId(row["run_id"])

    async def mark_started(self, tenant_id: TenantId, intent_id: IntentId) -> None:
        await self._c.execute(
            text(
                "UPDATE intents SET started_at = now() WHERE tenant_id = :t AND intent_id = :i"
                " AND started_at IS NULL AND settled_at IS NULL"
            ),
            {"t": tenant_id, "i": intent_id},
        )


class PgLeaseRepository(SqlRepository):
    # Database time throughout, so instances with skewed clocks agree on who expired.
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        row = await self._one(
            "INSERT INTO instance_leases (instance_id, holder, expires_at)"
            " VALUES (:n, :h, now() + make_interval(secs => :ttl))"
            " ON CONFLICT (instance_id) DO UPDATE SET holder = excluded.holder,"
            " started_at = now(), last_beat_at = now(), expires_at = excluded.expires_at,"
            " released = false"
            " WHERE instance_leases.released OR instance_leases.expires_at <= now()"
            " RETURNING instance_id",
            n=name,
            h=holder,
            ttl=ttl_s,
        )
        return row is not None

    async def beat(self, name: str, holder: str, ttl_s: float) -> bool:
        return (
            await self._count(
                "UPDATE instance_leases SET last_beat_at = now(),"
                " expires_at = now() + make_interval(secs => :ttl)"
                " WHERE instance_id = :n AND holder = :h AND NOT released",
                n=name,
                h=holder,
                ttl=ttl_s,
            )
            == 1
        )

    async def release(self, name: str, holder: str) -> None:
        await self._c.execute(
            text(
                "UPDATE instance_leases SET released = true, expires_at = now()"
                " WHERE instance_id = :n AND holder = :h"
            ),
            {"n": name, "h": holder},
        )

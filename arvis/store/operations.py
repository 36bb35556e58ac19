"""The lifecycle's write steps on PostgreSQL: each one statement, one round trip, one commit.

The statements call the server-side functions of ``arvis/store/sql/`` (one file
per function, their current text) on a psycopg pool of autocommit connections
with prepared statements: a statement is its own transaction. Nothing here
decides anything; :mod:`arvis.lifecycle` does, and this module only writes what
it was told, answering the store's own checks as statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import IntegrityConflict, StoreUnavailable
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.domain.journal import artifact_text
from arvis.lifecycle.policy.budgets import charges_text
from arvis.lifecycle.ports import (
    Admission,
    AdmitAnswer,
    AppendAnswer,
    ApprovalStep,
    ApproveAnswer,
    ConfirmationRecord,
    ConsentAnswer,
    ConsentRenewal,
    ConsentRequest,
    DecisionHistory,
    InFlightAttempt,
    JournalAppend,
    JournalEntry,
    LatestAttempt,
    Resolution,
    ResolveAnswer,
    UncertainAttempt,
)
from arvis.store.engine import libpq_url
from arvis.store.errors import translate_driver
from arvis.store.reads import PgReads, confirmation_from, uncertain_from
from arvis.store.statements import (
    ADMIT_SQL,
    APPROVE_SQL,
    BEAT_LEASE_SQL,
    BUDGET_EXCEEDED_STATE,
    CLAIM_LEASE_SQL,
    CONSENT_SQL,
    EXPIRABLE_SQL,
    HISTORY_SQL,
    IN_FLIGHT_SQL,
    JOURNAL_SQL,
    LIVE_LEASES_SQL,
    MARK_STARTED_SQL,
    OPEN_UNCERTAIN_SQL,
    RECORD_ASK_SQL,
    RELEASE_LEASE_SQL,
    RESOLVE_SQL,
)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _renewal_json(renewal: ConsentRenewal | None) -> str | None:
    """The consent's next round as ``arvis_resolve`` takes it (one jsonb record)."""
    if renewal is None:
        return None
    approver = renewal.approver
    return json.dumps(
        {
            "confirmation_id": renewal.confirmation.confirmation_id,
            "round": renewal.round,
            "state": renewal.to_state.value,
            "expires_at": _stamp(renewal.expires_at),
            "decided_by": renewal.decided_by,
            "approver": None
            if approver is None
            else {
                "principal_id": approver.principal_id,
                "auth_method": approver.auth_method,
                "key_id": approver.key_id,
                "groups": approver.groups or [],
            },
        }
    )


class JournalHeader(NamedTuple):
    """What a journaling step knows of the entry before the statement places it."""

    tenant_id: TenantId
    run_id: RunId
    kind: str
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: str | None


class PgOperations:
    """The write steps and the reads of the lifecycle, on one pool."""

    def __init__(self, pool: AsyncConnectionPool, fingerprint: str) -> None:
        self.pool = pool
        self.fingerprint = fingerprint
        """DESIGN §5: the database's system identifier plus the schema revision."""
        self.append_observers: list[Callable[[JournalEntry], None]] = []
        """Told of every entry :meth:`journal` appended, after its commit (the
        checkpointer, the witness feed). An observer must not block and must not raise."""

    @classmethod
    async def open(
        cls, url: str, fingerprint: str, *, max_size: int = 10, timeout_s: float = 5.0
    ) -> PgOperations:
        pool = AsyncConnectionPool(
            libpq_url(url),
            min_size=1,
            max_size=max_size,
            # A request must not wait long for a connection during an outage.
            timeout=timeout_s,
            reconnect_timeout=timeout_s,
            kwargs={"autocommit": True, "prepare_threshold": 0, "connect_timeout": 5},
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StoreUnavailable("the database is unreachable") from exc
        return cls(pool, fingerprint)

    async def close(self) -> None:
        await self.pool.close()

    # -- plumbing -----------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        try:
            async with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreUnavailable("no database connection became available") from exc
        except psycopg.Error as exc:
            domain = translate_driver(exc)
            if domain is None:
                raise
            if isinstance(domain, StoreUnavailable):
                # Connections pooled before an outage are dead now: check them all
                # in the background so the next request gets a live one.
                asyncio.get_running_loop().create_task(self._check())
            raise domain from exc

    async def _check(self) -> None:
        with contextlib.suppress(Exception):
            await self.pool.check()

    async def _row(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> tuple[Any, ...]:
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(sql, params)
            row = await cursor.fetchone()
        assert row is not None
        return row

    async def _count(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(sql, params)
            return cursor.rowcount

    async def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """One prepared read on this pool (e.g. an API key per request)."""
        async with self._connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(sql, params)
            return await cursor.fetchone()

    # -- the write steps ----------------------------------------------------

    async def admit(self, admission: Admission) -> AdmitAnswer:
        intent = admission.intent
        context = intent.context
        receipt = admission.receipt
        policy = admission.policy
        params = (
            context.tenant_id,
            context.run_id,
            intent.plan_id,
            context.causal_id,
            intent.idempotency_key,
            intent.tool,
            intent.payload.digest,
            intent.attempt,
            intent.intent_id,
            intent.capability_id,
            admission.payload_text,
            admission.commitment,
            context.model_dump_json(),
            context.instance_id,
            intent.confirmation_id,
            admission.reserve,
            None if receipt is None else receipt.position,
            None if policy is None else policy.model_dump_json(),
            charges_text(admission.charges),
        )
        try:
            status, position, plan = await self._row(ADMIT_SQL, params)
        except IntegrityConflict as exc:
            budget = _spent_budget(exc)
            if budget is None:
                raise
            return AdmitAnswer(
                status="budget_exceeded", receipt_position=None, run_plan=None, budget=budget
            )
        return AdmitAnswer(status=status, receipt_position=position, run_plan=plan)

    def _answered(
        self,
        row: tuple[str, int | None, str | None, str | None],
        header: JournalHeader,
        body_text: str,
        stamp: str,
    ) -> JournalEntry | None:
        """The entry a journaling statement answered (None: none), built in one place
        for every step that appends; the append observers hear of each entry appended
        (the checkpointer), whichever step appended it."""
        status, position, prev_hash, entry_hash = row
        if position is None:
            return None
        assert prev_hash is not None
        assert entry_hash is not None
        entry = JournalEntry(
            tenant_id=header.tenant_id,
            run_id=header.run_id,
            position=position,
            kind=header.kind,
            causal_id=header.causal_id,
            idempotency_key=header.idempotency_key,
            attempt=header.attempt,
            intent_id=header.intent_id,
            boundary=header.boundary,
            body_text=body_text,
            prev_hash=prev_hash,
            entry_hash=entry_hash,
            recorded_at=datetime.fromisoformat(stamp),
        )
        # 'existing': a retried statement found its own append committed (the first
        # answer was lost), so nobody was told of it yet; telling twice is harmless.
        if status in ("appended", "existing"):
            for observe in self.append_observers:
                observe(entry)
        return entry

    async def journal(self, append: JournalAppend) -> AppendAnswer:
        body_text = artifact_text(append.artifact)
        stamp = _stamp(append.recorded_at)
        bind = append.bind
        change = append.confirmation
        kind = _KIND[type(append.artifact).__name__]
        status, position, prev_hash, entry_hash = await self._row(
            JOURNAL_SQL,
            (
                append.tenant_id,
                append.run_id,
                kind,
                append.causal_id,
                append.idempotency_key,
                append.attempt,
                append.intent_id,
                None if append.boundary is None else append.boundary.value,
                append.retryable,
                body_text,
                stamp,
                append.settle,
                bind is not None,
                None if bind is None else bind.plan_id,
                None if bind is None else bind.tool,
                None if bind is None else bind.payload_digest,
                None if bind is None else bind.payload_text,
                None if change is None else change.confirmation_id,
                None if change is None else [s.value for s in change.from_states],
                None if change is None else change.to_state.value,
                change is not None and change.strict,
                None if change is None else change.decided_by,
                None if change is None else change.reason,
                append.flag,
                append.release_budgets,
            ),
        )
        entry = self._answered(
            (status, position, prev_hash, entry_hash),
            JournalHeader(
                append.tenant_id,
                append.run_id,
                kind,
                append.causal_id,
                append.idempotency_key,
                append.attempt,
                append.intent_id,
                None if append.boundary is None else append.boundary.value,
            ),
            body_text,
            stamp,
        )
        return AppendAnswer(status=status, entry=entry)

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
                | {"confirmation_id": row["confirmation_id"]}
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

    async def resolve(self, resolution: Resolution) -> ResolveAnswer:
        body_text = artifact_text(resolution.artifact)
        stamp = _stamp(resolution.recorded_at)
        boundary = resolution.artifact.boundary.value
        status, position, prev_hash, entry_hash = await self._row(
            RESOLVE_SQL,
            (
                resolution.tenant_id,
                resolution.run_id,
                resolution.causal_id,
                resolution.idempotency_key,
                resolution.attempt,
                resolution.uncertain_position,
                boundary,
                resolution.resolved_by,
                body_text,
                stamp,
                _renewal_json(resolution.renewal),
            ),
        )
        entry = self._answered(
            (status, position, prev_hash, entry_hash),
            JournalHeader(
                resolution.tenant_id,
                resolution.run_id,
                "resolution",
                resolution.causal_id,
                resolution.idempotency_key,
                None,
                None,
                boundary,
            ),
            body_text,
            stamp,
        )
        return ResolveAnswer(status=status, entry=entry)

    async def approve(self, step: ApprovalStep) -> ApproveAnswer:
        record = step.confirmation
        body_text = artifact_text(step.artifact)
        stamp = _stamp(step.recorded_at)
        status, position, prev_hash, entry_hash = await self._row(
            APPROVE_SQL,
            (
                record.tenant_id,
                record.run_id,
                record.causal_id,
                record.idempotency_key,
                record.confirmation_id,
                record.round,
                step.approver_principal,
                step.approver_method,
                step.approver_key_id,
                list(step.approver_groups),
                step.seen,
                step.to_state.value,
                step.decided_by,
                body_text,
                stamp,
            ),
        )
        entry = self._answered(
            (status, position, prev_hash, entry_hash),
            JournalHeader(
                record.tenant_id,
                record.run_id,
                "confirmation",
                record.causal_id,
                record.idempotency_key,
                None,
                None,
                None,
            ),
            body_text,
            stamp,
        )
        if status != "appended":
            entry = None
        return ApproveAnswer(status=status, entry=entry)

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

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[PgReads]:
        """One REPEATABLE READ, READ ONLY transaction: every read sees one snapshot."""
        async with self._connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgReads(conn)

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


def _spent_budget(error: IntegrityConflict) -> str | None:
    """The budget ``arvis_admit`` found spent, when that is what ``error`` is."""
    cause = error.__cause__
    if not isinstance(cause, psycopg.Error) or cause.sqlstate != BUDGET_EXCEEDED_STATE:
        return None
    diag = cause.diag.message_detail
    return diag if isinstance(diag, str) else None


_KIND = {
    "ExecutionArtifact": "execution",
    "RefusalArtifact": "refusal",
    "RecoveryArtifact": "recovery",
    "ConsentArtifact": "confirmation",
    "ResolutionArtifact": "resolution",
}

"""What every step of the fake store shares: the database it writes, the clock, a
step's round trip and commit, and what stands for ``arvis_bind`` and the confirmation
triggers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.errors import IntegrityConflict, StoreUnavailable
from arvis.domain.ids import IdempotencyKey, PlanId, RunId, TenantId
from arvis.lifecycle.ports import (
    InFlightAttempt,
    JournalEntry,
)
from tests.support.fakestore.journal import Refused, stamp
from tests.support.fakestore.tables import (
    AttemptRow,
    ConfirmationRow,
    DecisionRow,
    RunRow,
    Tables,
)


class _SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeDatabase:
    """The tables and the database's clock, shared by every store opened on it (each
    store stands for one process's connection pool)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or _SystemClock()
        self.tables = Tables()


class StoreBase:
    """One process's connection to a :class:`FakeDatabase`."""

    database: FakeDatabase
    fingerprint: str
    append_observers: list[Callable[[JournalEntry], None]]
    outage: bool
    statements: int
    _lost: list[str]

    @property
    def tables(self) -> Tables:
        return self.database.tables

    @tables.setter
    def tables(self, committed: Tables) -> None:
        self.database.tables = committed

    @property
    def clock(self) -> Clock:
        return self.database.clock

    def lose_answer(self, step: str) -> None:
        """The next ``step`` (a method name) commits, then its answer is lost."""
        self._lost.append(step)

    def now(self) -> datetime:
        return self.clock.now()

    async def _enter(self) -> None:
        await asyncio.sleep(0)
        self.statements += 1
        if self.outage:
            raise StoreUnavailable("the database is unreachable")

    def _commit(self, step: str, work: Tables) -> None:
        self.tables = work
        if step in self._lost:
            self._lost.remove(step)
            raise StoreUnavailable("the connection was lost after the commit")

    def _observe(self, status: str, entry: JournalEntry | None) -> None:
        if status in ("appended", "existing") and entry is not None:
            for observe in self.append_observers:
                observe(entry)

    def _bind(
        self,
        t: Tables,
        *,
        tenant: str,
        run: str,
        plan: str | None,
        causal: str,
        key: str | None,
        tool: str | None,
        digest: str | None,
        payload_text: str | None,
        principal: str | None,
    ) -> tuple[str, str | None]:
        if not principal:
            raise Refused(IntegrityConflict("a run is bound to a principal; none was given", None))
        found = t.runs.get((tenant, run))
        if found is None:
            if plan is None:
                raise Refused(IntegrityConflict("a new run needs a plan", "runs_plan_id"))
            t.runs[(tenant, run)] = RunRow(plan, principal, created_at=self.now())
            run_plan: str | None = plan
        else:
            run_plan = found.plan_id
            if found.principal_id is None:
                t.runs[(tenant, run)] = replace(found, principal_id=principal)
            elif found.principal_id != principal:
                return "identity_mismatch", run_plan
        if key is None:
            return "known", run_plan
        decision = t.decisions.get((tenant, run, causal))
        if decision is not None:
            return ("known" if decision.idempotency_key == key else "causal_conflict"), run_plan
        t.decisions[(tenant, run, causal)] = DecisionRow(
            idempotency_key=key,
            tool=tool or "",
            payload_digest=digest or "",
            payload=None if payload_text is None else json.loads(payload_text),
        )
        return "new", run_plan

    def _move_consent(
        self,
        t: Tables,
        tenant: str,
        confirmation_id: str,
        from_states: tuple[str, ...],
        to_state: str,
        *,
        decided_by: str | None,
        reason: str | None,
        at: datetime,
    ) -> bool:
        row = t.confirmations.get((tenant, confirmation_id))
        if row is None or row.state not in from_states:
            return False
        t.confirmations[(tenant, confirmation_id)] = replace(
            row,
            state=to_state,
            decided_by=decided_by if decided_by is not None else row.decided_by,
            decision_reason=reason if reason is not None else row.decision_reason,
            decided_at=row.decided_at if decided_by is None else at_(at),
        )
        self._consent_event(t, row.state, to_state, row)
        return True

    def _consent_event(self, t: Tables, old: str | None, new: str, row: ConfirmationRow) -> None:
        """What the triggers on ``confirmations`` put in the notification outbox."""
        if old is not None and (
            old == new
            or not (
                (old == "PENDING" and new == "APPROVED")
                or (old == "CONSUMED" and new in ("PENDING", "APPROVED"))
                or new in ("DENIED", "EXPIRED")
            )
        ):
            return
        kind = "requested" if old is None or new == "PENDING" else new.lower()
        t.events = (*t.events, (f"confirmation.{kind}", row.confirmation_id))


class Spent(Exception):
    """A budget charge that does not fit: ``arvis_admit`` raises SQLSTATE AR010."""

    def __init__(self, budget: str) -> None:
        self.budget = budget


def plan_of(plan: Any) -> PlanId | None:
    return None if plan is None else PlanId(str(plan))


def at_(moment: datetime) -> datetime:
    """A moment as timestamptz keeps it: microseconds, UTC."""
    return datetime.fromisoformat(stamp(moment))


def boundary_of(value: str | None) -> EffectBoundary:
    assert value is not None
    return EffectBoundary(value)


def in_flight_of(t: Tables, row: AttemptRow) -> InFlightAttempt:
    decision = t.decisions[(row.tenant_id, row.run_id, row.causal_id)]
    return InFlightAttempt(
        tenant_id=TenantId(row.tenant_id),
        idempotency_key=IdempotencyKey(row.idempotency_key),
        attempt=row.attempt,
        run_id=RunId(row.run_id),
        causal_id=row.causal_id,
        tool=row.tool,
        plan_id=row.plan_id,  # type: ignore[arg-type]
        intent_id=row.intent_id,  # type: ignore[arg-type]
        capability_id=row.capability_id,  # type: ignore[arg-type]
        commitment=row.commitment,
        receipt_position=row.receipt_position,
        context=row.context,
        owner=row.owner,
        confirmation_id=row.confirmation_id,  # type: ignore[arg-type]
        admitted_at=row.admitted_at,
        started=row.started_at is not None,
        payload_digest=decision.payload_digest,
        policy=row.policy,
    )

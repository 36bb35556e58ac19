"""An in-memory :class:`arvis.lifecycle.ports.LifecycleStore` for the lifecycle's rule tests.

It answers what the PostgreSQL functions of ``arvis/store/sql/`` answer, status for
status (tests/integration/store/test_lifecycle_store_contract.py runs the same cases
on both): the binding of runs and causal ids (``arvis_bind``), admission with its
staleness checks, reservation and budget charges (``arvis_admit``), the one journal
writer with settlement, refusal staleness, confirmation changes and the hash chain
(``arvis_journal``), consent (``arvis_request_consent``), quorum approval
(``arvis_approve``), resolution with the consent's next round (``arvis_resolve``) and
the triggers' open ``resolutions`` rows. It takes only the Python protocol's values,
never an SQL argument list.

"The database's clock" is the clock it is given (a test's hand clock). Each step is
one atomic step of the event loop after one yield (a round trip), so concurrent
callers interleave between steps as they do on the server. :attr:`outage` makes every
step fail as an unreachable database does; :meth:`lose_answer` commits a step and then
loses its answer, as a connection dropped after COMMIT does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from arvis.domain.checkpoints import Checkpoint
from arvis.domain.clock import Clock
from arvis.domain.errors import IntegrityConflict, StoreUnavailable
from arvis.domain.ids import ConfirmationId, IdempotencyKey, PlanId, RunId, TenantId
from arvis.domain.journal import artifact_text
from arvis.lifecycle.ports import (
    Admission,
    AdmitAnswer,
    AppendAnswer,
    ApprovalStep,
    ApproveAnswer,
    ConfirmationRecord,
    ConsentAnswer,
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
from tests.support.fakestore.journal import Append, Refused, append_entry, kind_of, stamp
from tests.support.fakestore.reads import FakeReads, confirmation_record, uncertain_attempt
from tests.support.fakestore.tables import (
    ApprovalRow,
    AttemptRow,
    ConfirmationRow,
    DecisionRow,
    LeaseRow,
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


class FakeLifecycleStore:
    """The lifecycle's store in dicts (see the module's docstring)."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        database: FakeDatabase | None = None,
        fingerprint: str = "fake-store:0011",
    ) -> None:
        self.database = database or FakeDatabase(clock)
        self.fingerprint = fingerprint
        self.append_observers: list[Callable[[JournalEntry], None]] = []
        self.outage = False
        """Every step fails with StoreUnavailable before it writes anything."""
        self._lost: list[str] = []
        self.statements = 0
        """How many steps reached the store (round trips)."""

    def opened_again(self) -> FakeLifecycleStore:
        """Another process's store on the same database."""
        return FakeLifecycleStore(database=self.database, fingerprint=self.fingerprint)

    @property
    def tables(self) -> Tables:
        return self.database.tables

    @tables.setter
    def tables(self, committed: Tables) -> None:
        self.database.tables = committed

    @property
    def clock(self) -> Clock:
        return self.database.clock

    # -- plumbing -----------------------------------------------------------

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

    # -- arvis_bind ---------------------------------------------------------

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
            assert plan is not None
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

    # -- the write steps ----------------------------------------------------

    async def admit(self, admission: Admission) -> AdmitAnswer:
        await self._enter()
        t = self.tables.copy()
        try:
            answer = self._admit(t, admission)
        except Refused as refused:
            if isinstance(refused.error, _Spent):
                return AdmitAnswer("budget_exceeded", None, None, budget=refused.error.budget)
            raise refused.error from None
        self._commit("admit", t)
        return answer

    def _admit(self, t: Tables, admission: Admission) -> AdmitAnswer:
        intent = admission.intent
        context = intent.context
        tenant, run, key = context.tenant_id, context.run_id, intent.idempotency_key
        bound, run_plan = self._bind(
            t,
            tenant=tenant,
            run=run,
            plan=intent.plan_id,
            causal=context.causal_id,
            key=key,
            tool=intent.tool,
            digest=intent.payload.digest,
            payload_text=admission.payload_text,
            principal=context.principal_id,
        )
        plan = None if run_plan is None else PlanId(run_plan)

        def stale() -> AdmitAnswer:
            return AdmitAnswer("stale", None, plan)

        if bound in ("identity_mismatch", "causal_conflict"):
            return AdmitAnswer(bound, None, plan)  # type: ignore[arg-type]
        if bound == "new":
            if intent.attempt != 1 or intent.confirmation_id is not None:
                return stale()
        else:
            if (tenant, key) in t.attempts:
                return stale()
            if t.last_attempt.get((tenant, key), 0) + 1 != intent.attempt:
                return stale()
            consent_id = t.consent_of.get((tenant, key))
            if consent_id != intent.confirmation_id:
                return stale()
            if intent.confirmation_id is not None:
                consent = t.confirmations[(tenant, intent.confirmation_id)]
                if admission.reserve:
                    if consent.state != "APPROVED" or consent.expires_at <= self.now():
                        return stale()
                    t.confirmations[(tenant, consent.confirmation_id)] = replace(
                        consent, state="RESERVED"
                    )
                elif consent.state != "CONSUMED":
                    return stale()
        receipts = t.runs[(tenant, run)].receipts
        declared = admission.receipt
        position = receipts + 1 if declared is None else declared.position
        if position <= receipts:
            return AdmitAnswer("receipt_reused", position, plan)
        for charge in sorted(admission.charges, key=lambda c: (c.budget, c.scope_key)):
            window = (tenant, charge.budget, charge.scope_key, charge.window_start)
            used = t.budget_usage.get(window, Decimal(0)) + charge.amount
            if used > charge.limit:
                raise Refused(_Spent(charge.budget))
            t.budget_usage[window] = used
        t.runs[(tenant, run)] = replace(t.runs[(tenant, run)], receipts=position)
        policy = admission.policy
        t.attempts[(tenant, key)] = AttemptRow(
            tenant_id=tenant,
            idempotency_key=key,
            attempt=intent.attempt,
            run_id=run,
            causal_id=context.causal_id,
            tool=intent.tool,
            plan_id=intent.plan_id,
            intent_id=intent.intent_id,
            capability_id=intent.capability_id,
            commitment=admission.commitment,
            receipt_position=position,
            context=json.loads(context.model_dump_json()),
            owner=context.instance_id,
            confirmation_id=intent.confirmation_id,
            admitted_at=self.now(),
            policy=None if policy is None else json.loads(policy.model_dump_json()),
            budgets=tuple(c.row() for c in admission.charges) if admission.charges else None,
        )
        return AdmitAnswer("admitted", position, plan)

    async def journal(self, append: JournalAppend) -> AppendAnswer:
        await self._enter()
        t = self.tables.copy()
        try:
            status, entry = self._journal(t, append)
        except Refused as refused:
            raise refused.error from None
        self._commit("journal", t)
        self._observe(status, entry)
        return AppendAnswer(status, entry)  # type: ignore[arg-type]

    def _journal(self, t: Tables, append: JournalAppend) -> tuple[str, JournalEntry | None]:
        tenant, run, key = append.tenant_id, append.run_id, append.idempotency_key
        body_text = artifact_text(append.artifact)
        recorded = stamp(append.recorded_at)
        boundary = None if append.boundary is None else append.boundary.value
        if append.bind is not None:
            bind = append.bind
            principal = json.loads(body_text).get("principal_id")
            bound, _ = self._bind(
                t,
                tenant=tenant,
                run=run,
                plan=bind.plan_id,
                causal=append.causal_id,
                key=key,
                tool=bind.tool,
                digest=bind.payload_digest,
                payload_text=bind.payload_text,
                principal=principal,
            )
            if bound in ("causal_conflict", "identity_mismatch"):
                return bound, None
        attempt = append.attempt
        if attempt is not None:
            old = t.attempt_entry(tenant, key, attempt)
            if old is not None:
                entry = old.entry
                if (
                    entry.intent_id == append.intent_id
                    and entry.boundary == boundary
                    and entry.body_text == body_text
                    and stamp(entry.recorded_at) == recorded
                ):
                    return "existing", entry
                return ("conflict" if append.settle else "stale"), None
            if append.settle:
                row = t.attempts.get((tenant, key))
                if row is None or row.attempt != attempt:
                    return "conflict", None
                del t.attempts[(tenant, key)]
                if append.release_budgets and row.budgets is not None:
                    for charge in sorted(row.budgets, key=lambda c: (c["budget"], c["scope"])):
                        window = (
                            tenant,
                            charge["budget"],
                            charge["scope"],
                            datetime.fromisoformat(charge["window_start"]),
                        )
                        if window in t.budget_usage:
                            t.budget_usage[window] -= Decimal(charge["amount"])
            elif (tenant, key) in t.attempts or t.last_attempt.get((tenant, key), 0) + 1 != attempt:
                return "stale", None
        change = append.confirmation
        if change is not None:
            moved = self._move_consent(
                t,
                tenant,
                change.confirmation_id,
                tuple(s.value for s in change.from_states),
                change.to_state.value,
                decided_by=change.decided_by,
                reason=change.reason,
                at=append.recorded_at,
            )
            if not moved and change.strict:
                return "stale", None
        entry = append_entry(
            self,
            t,
            Append(
                tenant=tenant,
                run=run,
                kind=kind_of(append.artifact),
                causal=append.causal_id,
                key=key,
                attempt=attempt,
                intent=append.intent_id,
                boundary=boundary,
                retryable=append.retryable,
                body_text=body_text,
                recorded=recorded,
                flag=append.flag,
            ),
        )
        return "appended", entry

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
            decided_at=row.decided_at if decided_by is None else _at(at),
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

    async def request_consent(self, request: ConsentRequest) -> ConsentAnswer:
        await self._enter()
        t = self.tables.copy()
        try:
            answer = self._request_consent(t, request)
        except Refused as refused:
            raise refused.error from None
        self._commit("request_consent", t)
        return answer

    def _request_consent(self, t: Tables, request: ConsentRequest) -> ConsentAnswer:
        record = request.confirmation
        tenant, key = record.tenant_id, record.idempotency_key
        bound, plan = self._bind(
            t,
            tenant=tenant,
            run=record.run_id,
            plan=request.plan_id,
            causal=record.causal_id,
            key=key,
            tool=record.tool,
            digest=request.payload_digest,
            payload_text=request.payload_text,
            principal=record.context.get("principal_id"),
        )
        if bound in ("identity_mismatch", "causal_conflict"):
            return ConsentAnswer(bound, None, _plan(plan))  # type: ignore[arg-type]
        if (tenant, record.confirmation_id) in t.confirmations or (tenant, key) in t.consent_of:
            existing = t.consent_of.get((tenant, key))
            return ConsentAnswer(
                "existing", None if existing is None else ConfirmationId(existing), _plan(plan)
            )
        row = ConfirmationRow(
            tenant_id=tenant,
            confirmation_id=record.confirmation_id,
            run_id=record.run_id,
            causal_id=record.causal_id,
            idempotency_key=key,
            tool=record.tool,
            payload_digest=request.payload_digest,
            payload=json.loads(request.payload_text),
            state="PENDING",
            context=json.loads(json.dumps(record.context)),
            expires_at=_at(record.expires_at),
            created_at=_at(record.created_at),
            approver_groups=tuple(record.approver_groups),
            quorum=record.quorum,
            definition_fingerprint=record.definition_fingerprint,
            policy_digest=record.policy_digest,
        )
        t.confirmations[(tenant, row.confirmation_id)] = row
        t.consent_of[(tenant, key)] = row.confirmation_id
        self._consent_event(t, None, "PENDING", row)
        return ConsentAnswer("created", record.confirmation_id, _plan(plan))

    async def history(
        self, tenant_id: TenantId, run_id: RunId, causal_id: str, key: IdempotencyKey
    ) -> DecisionHistory:
        await self._enter()
        t = self.tables
        decision = t.decisions.get((tenant_id, run_id, causal_id))
        run = t.runs.get((tenant_id, run_id))
        latest = None
        last = t.last_attempt.get((tenant_id, key))
        if last is not None:
            stored = t.attempt_entry(tenant_id, key, last)
            assert stored is not None
            entry = stored.entry
            resolution = t.resolutions.get((tenant_id, key, last))
            if resolution is not None and resolution.boundary is None:
                resolution = None
            plan = entry.body.get("plan_id") or (None if run is None else run.plan_id)
            latest = LatestAttempt(
                attempt=last,
                boundary=_boundary(entry.boundary),
                retryable=stored.retryable,
                position=entry.position,
                resolved=None if resolution is None else _boundary(resolution.boundary),
                resolution_position=None if resolution is None else resolution.position,
                plan_id=_plan(plan),
            )
        in_flight = t.attempts.get((tenant_id, key))
        consent_id = t.consent_of.get((tenant_id, key))
        return DecisionHistory(
            bound_key=None if decision is None else IdempotencyKey(decision.idempotency_key),
            latest=latest,
            in_flight=None if in_flight is None else in_flight.attempt,
            confirmation=None
            if consent_id is None
            else confirmation_record(t, t.confirmations[(tenant_id, consent_id)]),
            read_at=self.now(),
            owner=None if run is None else run.principal_id,
        )

    async def mark_started(self, tenant_id: TenantId, key: IdempotencyKey, attempt: int) -> None:
        await self._enter()
        t = self.tables.copy()
        row = t.attempts.get((tenant_id, key))
        if row is not None and row.attempt == attempt and row.started_at is None:
            t.attempts[(tenant_id, key)] = replace(row, started_at=self.now())
        self._commit("mark_started", t)

    async def resolve(self, resolution: Resolution) -> ResolveAnswer:
        await self._enter()
        t = self.tables.copy()
        status, entry = self._resolve(t, resolution)
        self._commit("resolve", t)
        self._observe(status, entry)
        return ResolveAnswer(status, entry)  # type: ignore[arg-type]

    def _resolve(self, t: Tables, r: Resolution) -> tuple[str, JournalEntry | None]:
        tenant, key, attempt = r.tenant_id, r.idempotency_key, r.attempt
        row = t.resolutions.get((tenant, key, attempt))
        if row is None or row.run_id != r.run_id or row.uncertain_position != r.uncertain_position:
            return "not_uncertain", None
        if row.boundary is not None:
            return "resolved", None
        renewal = r.renewal
        if renewal is not None:
            consent = t.confirmations.get((tenant, renewal.confirmation.confirmation_id))
            if (
                consent is None
                or consent.idempotency_key != key
                or consent.state != "CONSUMED"
                or consent.round != renewal.round - 1
                or (tenant, key) in t.attempts
                or t.last_attempt.get((tenant, key), 0) > attempt
            ):
                return "stale", None
        boundary = r.artifact.boundary.value
        body_text = artifact_text(r.artifact)
        entry = append_entry(
            self,
            t,
            Append(
                tenant=tenant,
                run=r.run_id,
                kind="resolution",
                causal=r.causal_id,
                key=key,
                attempt=None,
                intent=None,
                boundary=boundary,
                retryable=False,
                body_text=body_text,
                recorded=stamp(r.recorded_at),
                flag=None,
            ),
        )
        t.resolutions[(tenant, key, attempt)] = replace(
            row,
            boundary=boundary,
            resolved_by=r.resolved_by,
            resolved_at=_at(r.recorded_at),
            position=entry.position,
        )
        if renewal is not None:
            consent = t.confirmations[(tenant, renewal.confirmation.confirmation_id)]
            renewed = replace(
                consent,
                state=renewal.to_state.value,
                round=renewal.round,
                renewed_at=_at(r.recorded_at),
                expires_at=_at(renewal.expires_at),
                decided_by=renewal.decided_by,
                decided_at=None if renewal.decided_by is None else _at(r.recorded_at),
                decision_reason=None,
            )
            t.confirmations[(tenant, consent.confirmation_id)] = renewed
            self._consent_event(t, consent.state, renewed.state, renewed)
            approver = renewal.approver
            if approver is not None:
                where = (tenant, consent.confirmation_id, renewal.round, approver.principal_id)
                t.approvals[where] = ApprovalRow(
                    principal_id=approver.principal_id,
                    auth_method=approver.auth_method,
                    key_id=approver.key_id,
                    groups=tuple(approver.groups or ()),
                    decided_at=_at(r.recorded_at),
                    position=entry.position,
                )
        return "appended", entry

    async def approve(self, step: ApprovalStep) -> ApproveAnswer:
        await self._enter()
        t = self.tables.copy()
        status, entry = self._approve(t, step)
        self._commit("approve", t)
        self._observe(status, entry)
        return ApproveAnswer(status, entry if status == "appended" else None)  # type: ignore[arg-type]

    def _approve(self, t: Tables, step: ApprovalStep) -> tuple[str, JournalEntry | None]:
        record = step.confirmation
        tenant, cid, round_ = record.tenant_id, record.confirmation_id, record.round
        if (tenant, cid, round_, step.approver_principal) in t.approvals:
            return "duplicate", None
        row = t.confirmations.get((tenant, cid))
        if row is not None and row.expires_at <= self.now():
            return "expired", None
        seen = sum(1 for k in t.approvals if k[:3] == (tenant, cid, round_))
        if row is None or row.round != round_ or seen != step.seen:
            return "stale", None
        body_text = artifact_text(step.artifact)
        if not self._move_consent(
            t,
            tenant,
            cid,
            ("PENDING",),
            step.to_state.value,
            decided_by=step.decided_by,
            reason=None,
            at=step.recorded_at,
        ):
            return "stale", None
        entry = append_entry(
            self,
            t,
            Append(
                tenant=tenant,
                run=record.run_id,
                kind="confirmation",
                causal=record.causal_id,
                key=record.idempotency_key,
                attempt=None,
                intent=None,
                boundary=None,
                retryable=False,
                body_text=body_text,
                recorded=stamp(step.recorded_at),
                flag=None,
            ),
        )
        t.approvals[(tenant, cid, round_, step.approver_principal)] = ApprovalRow(
            principal_id=step.approver_principal,
            auth_method=step.approver_method,
            key_id=step.approver_key_id,
            groups=tuple(step.approver_groups),
            decided_at=_at(step.recorded_at),
            position=entry.position,
        )
        return "appended", entry

    # -- what the sweepers read and mark -------------------------------------

    async def open_uncertain(self, *, limit: int, max_asks: int) -> list[UncertainAttempt]:
        await self._enter()
        t = self.tables
        now = self.now()
        due = [
            (row.next_ask_at or now, (tenant, key, attempt))
            for (tenant, key, attempt), row in t.resolutions.items()
            if row.boundary is None and (row.next_ask_at or now) <= now and row.asks < max_asks
        ]
        due.sort(key=lambda item: item[0])
        found = [uncertain_attempt(t, *where) for _, where in due[:limit]]
        return [attempt for attempt in found if attempt is not None]

    async def record_ask(
        self, tenant_id: TenantId, key: str, attempt: int, next_in_s: float
    ) -> None:
        await self._enter()
        t = self.tables.copy()
        row = t.resolutions.get((tenant_id, key, attempt))
        if row is not None and row.boundary is None:
            t.resolutions[(tenant_id, key, attempt)] = replace(
                row, asks=row.asks + 1, next_ask_at=self.now() + timedelta(seconds=next_in_s)
            )
        self._commit("record_ask", t)

    async def expirable(self, *, limit: int) -> list[ConfirmationRecord]:
        await self._enter()
        t = self.tables
        now = self.now()
        rows = sorted(
            (
                row
                for row in t.confirmations.values()
                if row.state in ("PENDING", "APPROVED") and row.expires_at <= now
            ),
            key=lambda row: row.expires_at,
        )
        return [confirmation_record(t, row) for row in rows[:limit]]

    async def in_flight(self, *, limit: int, owner: str | None = None) -> list[InFlightAttempt]:
        await self._enter()
        t = self.tables
        now = self.now()
        if owner is None:
            rows = [a for a in t.attempts.values() if not self._live(t, a.owner, now)]
        else:
            rows = [a for a in t.attempts.values() if a.owner == owner]
        rows.sort(key=lambda a: a.admitted_at)
        return [_in_flight(t, row) for row in rows[:limit]]

    @staticmethod
    def _live(t: Tables, name: str, now: datetime) -> bool:
        lease = t.leases.get(name)
        return lease is not None and not lease.released and lease.expires_at > now

    async def attempt(self, tenant_id: TenantId, key: IdempotencyKey) -> InFlightAttempt | None:
        await self._enter()
        row = self.tables.attempts.get((tenant_id, key))
        return None if row is None else _in_flight(self.tables, row)

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[FakeReads]:
        """Reads of the tables as they were committed when it began (a snapshot)."""
        await self._enter()
        yield FakeReads(self.tables)

    # -- leases ------------------------------------------------------------

    async def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        await self._enter()
        t = self.tables.copy()
        now = self.now()
        lease = t.leases.get(name)
        if lease is not None and not lease.released and lease.expires_at > now:
            return False
        t.leases[name] = LeaseRow(holder=holder, expires_at=now + timedelta(seconds=ttl_s))
        self._commit("claim_lease", t)
        return True

    async def beat_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        await self._enter()
        t = self.tables.copy()
        lease = t.leases.get(name)
        if lease is None or lease.holder != holder or lease.released:
            return False
        t.leases[name] = replace(lease, expires_at=self.now() + timedelta(seconds=ttl_s))
        self._commit("beat_lease", t)
        return True

    async def release_lease(self, name: str, holder: str) -> bool:
        await self._enter()
        t = self.tables.copy()
        lease = t.leases.get(name)
        if lease is None or lease.holder != holder or lease.released:
            return False
        t.leases[name] = replace(lease, released=True, expires_at=self.now())
        self._commit("release_lease", t)
        return True

    async def live_leases(self, instance_id: str) -> list[tuple[str, str]]:
        await self._enter()
        now = self.now()
        return sorted(
            (name, lease.holder)
            for name, lease in self.tables.leases.items()
            if name.startswith(instance_id + "/") and self._live(self.tables, name, now)
        )

    def expire_lease(self, name: str) -> None:
        """The lease ``name`` lapsed, as if its holder stopped beating (a crash)."""
        lease = self.tables.leases[name]
        t = self.tables.copy()
        t.leases[name] = replace(lease, expires_at=self.now())
        self.tables = t

    # -- the checkpoint store and the evidence flags (arvis.store.checkpoints) --

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        await self._enter()
        t = self.tables.copy()
        t.checkpoints.setdefault(
            (checkpoint.tenant_id, checkpoint.run_id, checkpoint.length), checkpoint
        )
        self._commit("save_checkpoint", t)

    async def flag_run(self, tenant_id: str, run_id: str, position: int, fault: str) -> None:
        await self._enter()
        t = self.tables.copy()
        run = t.runs.get((tenant_id, run_id))
        if run is not None and run.evidence_broken_at is None:
            t.runs[(tenant_id, run_id)] = replace(
                run, evidence_broken_at=position, evidence_fault=fault
            )
        self._commit("flag_run", t)

    async def checkpoints(self, tenant_id: TenantId, run_id: RunId) -> list[Checkpoint]:
        await self._enter()
        return [
            c
            for (tenant, run, _), c in sorted(self.tables.checkpoints.items())
            if (tenant, run) == (tenant_id, run_id)
        ]


class _Spent(Exception):
    def __init__(self, budget: str) -> None:
        self.budget = budget


def _plan(plan: Any) -> PlanId | None:
    return None if plan is None else PlanId(str(plan))


def _at(moment: datetime) -> datetime:
    """A moment as timestamptz keeps it: microseconds, UTC."""
    return datetime.fromisoformat(stamp(moment))


def _boundary(value: str | None) -> Any:
    from arvis.domain.boundary import EffectBoundary

    assert value is not None
    return EffectBoundary(value)


def _in_flight(t: Tables, row: AttemptRow) -> InFlightAttempt:
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

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

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

from arvis.domain.clock import Clock
from arvis.domain.ids import IdempotencyKey, PlanId, RunId, TenantId
from arvis.domain.journal import artifact_text
from arvis.lifecycle.records import DecisionHistory, JournalEntry, LatestAttempt
from arvis.lifecycle.writes import Admission, AdmitAnswer, AppendAnswer, JournalAppend
from tests.support.fakestore.base import FakeDatabase, Spent, boundary_of, plan_of
from tests.support.fakestore.chores import ChoreSteps
from tests.support.fakestore.consent import ConsentSteps
from tests.support.fakestore.journal import Append, Refused, append_entry, kind_of, stamp
from tests.support.fakestore.reads import FakeReads, confirmation_record
from tests.support.fakestore.tables import (
    AttemptRow,
    Tables,
)


class FakeLifecycleStore(ConsentSteps, ChoreSteps):
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

    async def admit(self, admission: Admission) -> AdmitAnswer:
        await self._enter()
        t = self.tables.copy()
        try:
            answer = self._admit(t, admission)
        except Refused as refused:
            if isinstance(refused.error, Spent):
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
                raise Refused(Spent(charge.budget))
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
        k = append.key
        tenant, run, key = k.tenant_id, k.run_id, k.idempotency_key
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
                causal=k.causal_id,
                key=key,
                tool=bind.tool,
                digest=bind.payload_digest,
                payload_text=bind.payload_text,
                principal=principal,
            )
            if bound in ("causal_conflict", "identity_mismatch"):
                return bound, None
        attempt = k.attempt
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
            self.now(),
            t,
            Append(
                key=k,
                kind=kind_of(append.artifact),
                intent=append.intent_id,
                boundary=boundary,
                retryable=append.retryable,
                body_text=body_text,
                recorded=recorded,
                flag=append.flag,
            ),
        )
        return "appended", entry

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
                boundary=boundary_of(entry.boundary),
                retryable=stored.retryable,
                position=entry.position,
                resolved=None if resolution is None else boundary_of(resolution.boundary),
                resolution_position=None if resolution is None else resolution.position,
                plan_id=plan_of(plan),
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

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[FakeReads]:
        """Reads of the tables as they were committed when it began (a snapshot)."""
        await self._enter()
        yield FakeReads(self.tables, self.now())

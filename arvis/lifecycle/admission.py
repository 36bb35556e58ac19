"""Admission (DESIGN §2 step 1): decide, then have the store write exactly that step.

One path for every decision. Python decides on what it knows of the decision's
history (:meth:`ToolAuthorizationService.decide`); the step's one store
operation writes it only if that knowledge is still true, and otherwise answers
so ("stale", "plan_mismatch"). The first round assumes a new decision — the
common case, admitted in one statement and one commit; a decision with history
costs one read of it and a second round. The same code decides both rounds.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.authorization import DenialReason, PolicyRecord
from arvis.domain.clock import Clock
from arvis.domain.errors import SerializationConflict
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    CapabilityId,
    CausalId,
    ConfirmationId,
    InstanceId,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)
from arvis.domain.payload import FrozenEffectPayload
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.authorization import (
    STALE_REASON,
    AdmissionRequest,
    AwaitConsent,
    Deduplicated,
    InFlight,
    Proceed,
    Refuse,
    ToolAuthorizationService,
    budget_refusal,
)
from arvis.lifecycle.effects import not_dispatched
from arvis.lifecycle.errors import AttemptInFlight, InvalidReceipt
from arvis.lifecycle.evidence import EvidenceService
from arvis.lifecycle.outbox import IntentOutboxService
from arvis.lifecycle.ports import (
    NEW_DECISION,
    Admission,
    ConfirmationChange,
    ConfirmationRecord,
    ConsentRequest,
    DecisionHistory,
    LifecycleStore,
)
from arvis.lifecycle.refusals import answer_deduplicated, refusal_append
from arvis.lifecycle.results import ConfirmationRef, Syscall, SyscallResult, result_from_entry
from arvis.tools.outcome import DispatchOutcome
from arvis.tools.plans import PlanLease, ToolPlanSource, lease_plan

log = logging.getLogger(__name__)

# A step decided on stale history is decided again on fresh history; a history
# that keeps changing under concurrent posts of one decision is a conflict to retry.
_ROUNDS = 4
# Runs are bound to a plan for ever, so the binding can be remembered; bounded
# so a long-lived instance does not grow without limit.
_REMEMBERED_RUNS = 100_000


@dataclass(frozen=True, slots=True)
class Ids:
    """Taken once per syscall, outside any retry, so a retried step writes the same rows."""

    capability: CapabilityId
    intent: IntentId
    confirmation: ConfirmationId
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class Admitted:
    """An attempt whose admission committed: run it, then journal it."""

    intent: Intent
    receipt: AuditReceipt
    lease: PlanLease
    blocked: DispatchOutcome | None = None
    """Set when the attempt was admitted but must not run (its receipt failed the
    check after the commit): it is journaled with this outcome instead."""
    policy: PolicyRecord | None = None
    """The policy that authorized it and the ids that decided, for its journal entry."""


@dataclass(frozen=True, slots=True)
class _Rebind:
    plan_id: PlanId


class AdmissionService:
    def __init__(
        self,
        *,
        store: LifecycleStore,
        plans: ToolPlanSource,
        authorization: ToolAuthorizationService,
        outbox: IntentOutboxService,
        clock: Clock,
        confirmation_ttl_s: float,
        evidence: EvidenceService | None = None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.authorization = authorization
        self.outbox = outbox
        self.clock = clock
        self.confirmation_ttl_s = confirmation_ttl_s
        self.evidence = evidence
        """Checks what a deduplicated answer serves (issue 23); None: nothing but the
        entry's own hash."""
        self._run_plans: OrderedDict[tuple[TenantId, RunId], PlanId] = OrderedDict()

    async def admit(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: Ids,
        owner: InstanceId,
    ) -> SyscallResult | Admitted:
        """Admit, refuse, ask for consent or answer the recorded result: one committed step."""
        run_key = (identity.tenant_id, RunId(syscall.run_id))
        # Plans are leased before any statement runs: leasing may touch the store.
        lease: PlanLease | None = await self._lease(self._run_plans.get(run_key), syscall.run_id)
        # The first round assumes a new decision. A declared sink records each intent
        # it is shown, so it is shown only intents decided on the known history.
        history: DecisionHistory | None = NEW_DECISION if self.outbox.sink is None else None
        try:
            for _ in range(_ROUNDS):
                plan_id = lease.plan.plan_id if lease is not None else self._run_plans[run_key]
                request = AdmissionRequest(
                    identity=identity,
                    run_id=RunId(syscall.run_id),
                    causal_id=CausalId(syscall.causal_id),
                    tool=syscall.decision.tool,
                    payload=payload,
                    plan=None if lease is None else lease.plan,
                    plan_id=plan_id,
                    instance_id=owner,
                )
                if history is None:
                    history = await self._history(request)
                written = await self._write(request, history, lease, ids)
                if isinstance(written, _Rebind):
                    self._remember(run_key, written.plan_id)
                    if lease is not None:
                        lease.release()
                    lease = await self._lease(written.plan_id, syscall.run_id)
                    continue
                if isinstance(written, DecisionHistory):
                    history = written
                    continue
                self._remember(run_key, plan_id)
                if not isinstance(written, Admitted) and lease is not None:
                    lease.release()
                return written
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if lease is not None:
            lease.release()
        raise SerializationConflict("the decision's history kept changing; post it again")

    async def _lease(self, plan_id: PlanId | None, run_id: str) -> PlanLease | None:
        if plan_id is None:
            return await lease_plan(self.plans)
        try:
            return await lease_plan(self.plans, plan_id)
        except Exception as exc:  # refused below as plan_unavailable, never run
            log.warning("plan %s of run %s unavailable: %s", plan_id, run_id, exc)
            return None

    def _remember(self, run_key: tuple[TenantId, RunId], plan_id: PlanId) -> None:
        self._run_plans[run_key] = plan_id
        self._run_plans.move_to_end(run_key)
        if len(self._run_plans) > _REMEMBERED_RUNS:
            self._run_plans.popitem(last=False)

    async def _write(
        self,
        request: AdmissionRequest,
        history: DecisionHistory,
        lease: PlanLease | None,
        ids: Ids,
    ) -> SyscallResult | Admitted | DecisionHistory | _Rebind:
        step = self.authorization.decide(request, history)
        if isinstance(step, Proceed):
            assert lease is not None
            return await self._proceed(request, step, lease, ids)
        if isinstance(step, Refuse):
            return await self._refuse(request, step, ids)
        if isinstance(step, Deduplicated):
            return await answer_deduplicated(
                self.store, request, step.position, step.resolution, self.evidence
            )
        if isinstance(step, InFlight):
            raise AttemptInFlight(request.idempotency_key)
        return await self._await_consent(request, step, ids)

    async def _history(self, request: AdmissionRequest) -> DecisionHistory:
        return await self.store.history(
            request.identity.tenant_id,
            request.run_id,
            request.causal_id,
            request.idempotency_key,
        )

    async def _proceed(
        self, request: AdmissionRequest, step: Proceed, lease: PlanLease, ids: Ids
    ) -> SyscallResult | Admitted | DecisionHistory | _Rebind:
        snapshot = step.snapshot
        policy = PolicyRecord.model_construct(
            engine=snapshot.policy_engine,
            version=snapshot.policy_version,
            digest=snapshot.policy_digest,
            policy_ids=snapshot.policy_ids,
        )
        intent = Intent.model_construct(
            intent_id=ids.intent,
            context=snapshot.context,
            tool=snapshot.tool,
            plan_id=request.plan_id,
            payload=request.payload,
            idempotency_key=snapshot.idempotency_key,
            attempt=snapshot.attempt,
            capability_id=ids.capability,
            confirmation_id=snapshot.confirmation_id,
            admitted_at=ids.recorded_at,
        )
        commitment = intent.commitment
        declared = await self.outbox.declared_receipt(intent, commitment)
        answer = await self.store.admit(
            Admission(
                intent=intent,
                commitment=commitment,
                payload_text=request.payload.canonical.decode(),
                reserve=step.reserve,
                receipt=declared,
                policy=policy,
                charges=step.charges,
            )
        )
        if answer.status != "admitted":
            await self.outbox.not_admitted(intent, answer.status)
        if answer.status == "admitted":
            assert answer.receipt_position is not None
            if declared is not None:
                return Admitted(intent, declared, lease, policy=policy)
            try:
                receipt = self.outbox.builtin_receipt(intent, commitment, answer.receipt_position)
            except InvalidReceipt as exc:
                # The check runs after the commit: it cannot undo the admission, it
                # stops the tool from running; the attempt is journaled as not started.
                receipt = AuditReceipt(
                    intent_commitment=commitment,
                    run_id=intent.context.run_id,
                    causal_id=intent.context.causal_id,
                    position=answer.receipt_position,
                    store_fingerprint=self.outbox.store_fingerprint,
                )
                return Admitted(
                    intent, receipt, lease, not_dispatched(exc.code, exc.message), policy
                )
            return Admitted(intent, receipt, lease, policy=policy)
        if answer.status == "budget_exceeded":
            # Nothing was written: the refusal is journaled like any other, on the
            # history this attempt was decided on (the store checks it is still that).
            assert answer.budget is not None
            return await self._refuse(request, budget_refusal(step, answer.budget), ids)
        if answer.status == "plan_mismatch":
            assert answer.run_plan is not None
            return _Rebind(answer.run_plan)
        if answer.status == "receipt_reused":
            raise InvalidReceipt("invalid audit receipt: its durable position was used already")
        return await self._history(request)

    async def _refuse(
        self, request: AdmissionRequest, step: Refuse, ids: Ids
    ) -> SyscallResult | DecisionHistory | _Rebind:
        append = refusal_append(
            request, step, request.payload.canonical.decode(), ids.recorded_at, ids.intent
        )
        if step.expire is not None:
            # The refusal and the confirmation's move to EXPIRED are one step, so the
            # journal shows why a consent that expired (or went stale) never ran.
            append = dataclasses.replace(
                append,
                confirmation=ConfirmationChange(
                    confirmation_id=step.expire.confirmation_id,
                    from_states=(ConfirmationState.PENDING, ConfirmationState.APPROVED),
                    to_state=ConfirmationState.EXPIRED,
                    reason=(
                        STALE_REASON
                        if step.denial.reason is DenialReason.APPROVAL_STALE
                        else "expired"
                    ),
                ),
            )
        answer = await self.store.journal(append)
        if answer.status in ("appended", "existing"):
            assert answer.entry is not None
            return result_from_entry(answer.entry)
        if answer.status == "plan_mismatch":
            return _Rebind(await self._bound_plan(request))
        return await self._history(request)

    async def _bound_plan(self, request: AdmissionRequest) -> PlanId:
        async with self.store.reading() as reads:
            run = await reads.run(request.identity.tenant_id, request.run_id)
        assert run is not None
        return run.plan_id

    async def _await_consent(
        self, request: AdmissionRequest, step: AwaitConsent, ids: Ids
    ) -> SyscallResult | DecisionHistory | _Rebind:
        if step.existing is not None:
            return _consent_answer(request, step.existing.confirmation_id)
        now = ids.recorded_at
        context = step.context
        terms = step.terms
        ttl_s = self.confirmation_ttl_s
        if terms is not None and terms.ttl_s is not None:
            ttl_s = terms.ttl_s
        record = ConfirmationRecord(
            confirmation_id=ids.confirmation,
            tenant_id=context.tenant_id,
            run_id=context.run_id,
            causal_id=context.causal_id,
            idempotency_key=request.idempotency_key,
            tool=request.tool,
            payload=request.payload.value,
            state=ConfirmationState.PENDING,
            context=context.model_dump(mode="json"),
            decided_by=None,
            decision_reason=None,
            decided_at=None,
            expires_at=now + timedelta(seconds=ttl_s),
            created_at=now,
            approver_groups=() if terms is None else terms.approvers,
            quorum=1 if terms is None else terms.quorum,
            definition_fingerprint=step.definition_fingerprint,
            policy_digest=step.policy_digest,
        )
        answer = await self.store.request_consent(
            ConsentRequest(
                confirmation=record,
                plan_id=request.plan_id,
                payload_digest=request.payload.digest,
                payload_text=request.payload.canonical.decode(),
            )
        )
        if answer.status == "created":
            return _consent_answer(request, record.confirmation_id)
        if answer.status == "plan_mismatch":
            assert answer.run_plan is not None
            return _Rebind(answer.run_plan)
        return await self._history(request)


def _consent_answer(request: AdmissionRequest, confirmation_id: ConfirmationId) -> SyscallResult:
    return SyscallResult(
        outcome="confirmation_required",
        boundary=None,
        detail="this action needs an approver's consent; re-post it once approved",
        idempotency_key=request.idempotency_key,
        run_id=request.run_id,
        causal_id=request.causal_id,
        confirmation=ConfirmationRef(id=confirmation_id, state=ConfirmationState.PENDING.value),
    )

"""Admission (DESIGN §2 step 1): decide, then have the store write exactly that step.

One path for every decision. Python decides on what it knows of the decision's
history (:meth:`ToolAuthorizationService.decide`); the step's one store
operation writes it only if that knowledge is still true, and otherwise answers
so ("stale"). The first round assumes a new decision — the common case, admitted
in one statement and one commit; a decision with history costs one read of it
and a second round. The same code decides both rounds.

**Runs and principals.** The statement that first touches a run binds it to the
principal of the step's sealed context, under the run's lock; every later step of
another principal is answered "identity_mismatch" and writes nothing. A decision
with history is decided on the history's ``owner`` too, so another principal
never receives its recorded result (DESIGN §10).

**Plans.** Every decision is decided under the instance's current plan, and a new
decision of a run runs with the current definitions (a tool added since the run
began is usable in it). A decision that has attempts keeps the definition its
latest attempt was decided under: the retry table reads that one, a recorded
result stays recorded, and a tool whose definition changed since an attempt that
may have taken effect is refused ``plan_retired`` before anything is minted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from arvis.domain.authorization import DenialReason, PolicyRecord, policy_record
from arvis.domain.canonical import canonical_bytes
from arvis.domain.clock import Clock
from arvis.domain.errors import SerializationConflict
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    CapabilityId,
    CausalId,
    ConfirmationId,
    InstanceId,
    IntentId,
    RunId,
)
from arvis.domain.intent import AuditReceipt, Intent
from arvis.domain.journal import EXPIRED_REASON, STALE_REASON
from arvis.domain.payload import FrozenEffectPayload
from arvis.domain.redaction import Redaction
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.authorization import ToolAuthorizationService, budget_refusal, needs_earlier
from arvis.lifecycle.effects import not_dispatched
from arvis.lifecycle.entries import expiry
from arvis.lifecycle.errors import AttemptInFlight, InvalidReceipt, RunOfAnotherPrincipal
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.receipts import IntentOutboxService
from arvis.lifecycle.records import NEW_DECISION, ConfirmationRecord, DecisionHistory
from arvis.lifecycle.refusals import answer_deduplicated, refusal_append
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import ConfirmationRef, SyscallResult, result_from_entry
from arvis.lifecycle.steps import (
    AdmissionRequest,
    AnotherPrincipal,
    AwaitConsent,
    Deduplicated,
    Earlier,
    InFlight,
    Proceed,
    Refuse,
)
from arvis.lifecycle.writes import Admission, ConsentRequest
from arvis.tools.outcome import DispatchOutcome
from arvis.tools.plans import PlanLease, ToolPlanSource, lease_plan

# A step decided on stale history is decided again on fresh history; a history
# that keeps changing under concurrent posts of one decision is a conflict to retry.
_ROUNDS = 4


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


REDACTED_SCHEMA_DETAIL = (
    "payload does not match the input schema (its message is not kept: [journal] redact is on)"
)


@dataclass(eq=False, kw_only=True)
class AdmissionService:
    store: LifecycleStore
    plans: ToolPlanSource
    authorization: ToolAuthorizationService
    outbox: IntentOutboxService
    clock: Clock
    confirmation_ttl_s: float
    evidence: EvidenceService | None = None
    """Checks what a deduplicated answer serves (issue 23); None: nothing but the
    entry's own hash."""
    redaction: Redaction = field(default_factory=Redaction)
    """Payload fields kept as their digest wherever the arguments are stored (issue 27)."""

    def _kept(self, payload: FrozenEffectPayload) -> tuple[Any, str]:
        """The arguments as the record keeps them, and their text: the frozen payload,
        less what ``[journal] redact`` names (the digests stay the clear payload's)."""
        if not self.redaction:
            return payload.value, payload.canonical.decode()
        kept = self.redaction.apply(payload.value)
        return kept, canonical_bytes(kept).decode()

    async def admit(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: Ids,
        owner: InstanceId,
    ) -> SyscallResult | Admitted:
        """Admit, refuse, ask for consent or answer the recorded result: one committed step.

        Every decision is decided under the current plan; a decision with history
        keeps what its latest attempt was decided under (:class:`Earlier`): a plan
        change never makes a decided action new. Raises :class:`RunOfAnotherPrincipal`
        for a run bound to another principal, having written nothing."""
        # Leased before any statement runs: leasing may touch the store.
        lease = await lease_plan(self.plans)
        request = AdmissionRequest(
            identity=identity,
            run_id=RunId(syscall.run_id),
            causal_id=CausalId(syscall.causal_id),
            tool=syscall.decision.tool,
            payload=payload,
            plan=lease.plan,
            plan_id=lease.plan.plan_id,
            instance_id=owner,
        )
        # The first round assumes a new decision. A declared sink records each intent
        # it is shown, so it is shown only intents decided on the known history.
        history: DecisionHistory | None = NEW_DECISION if self.outbox.sink is None else None
        try:
            for _ in range(_ROUNDS):
                if history is None:
                    history = await self._history(request)
                earlier = await self._earlier(request, history)
                written = await self._write(request, history, earlier, lease, ids)
                if isinstance(written, DecisionHistory):
                    history = written
                    continue
                if not isinstance(written, Admitted):
                    lease.release()
                return written
        except BaseException:
            lease.release()
            raise
        lease.release()
        raise SerializationConflict("the decision's history kept changing; post it again")

    async def _earlier(self, request: AdmissionRequest, history: DecisionHistory) -> Earlier | None:
        """The tool's definition under the plan of the decision's latest attempt, when
        that plan is not the current one and the decision depends on it. Plans are
        immutable and cached once loaded; one that cannot be loaded stops the syscall
        (nothing is recorded)."""
        latest = history.latest
        if latest is None or latest.plan_id in (None, request.plan_id):
            return None
        if not needs_earlier(history):
            return None
        async with await lease_plan(self.plans, latest.plan_id) as plan:
            return Earlier(plan.definitions.get(request.tool))

    async def _write(
        self,
        request: AdmissionRequest,
        history: DecisionHistory,
        earlier: Earlier | None,
        lease: PlanLease,
        ids: Ids,
    ) -> SyscallResult | Admitted | DecisionHistory:
        step = self.authorization.decide(request, history, earlier)
        if isinstance(step, Proceed):
            return await self._proceed(request, step, lease, ids)
        if isinstance(step, Refuse):
            return await self._refuse(request, step, ids)
        if isinstance(step, Deduplicated):
            return await answer_deduplicated(
                self.store, request, step.position, step.resolution, self.evidence
            )
        if isinstance(step, InFlight):
            raise AttemptInFlight(request.idempotency_key)
        if isinstance(step, AnotherPrincipal):
            raise RunOfAnotherPrincipal(request.run_id)
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
    ) -> SyscallResult | Admitted | DecisionHistory:
        snapshot = step.snapshot
        policy = policy_record(snapshot)
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
                payload_text=self._kept(request.payload)[1],
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
        if answer.status == "identity_mismatch":
            raise RunOfAnotherPrincipal(request.run_id)
        if answer.status == "receipt_reused":
            raise InvalidReceipt("invalid audit receipt: its durable position was used already")
        return await self._history(request)

    async def _refuse(
        self, request: AdmissionRequest, step: Refuse, ids: Ids
    ) -> SyscallResult | DecisionHistory:
        if step.expire is not None:
            # A consent found lapsed (or stale) at the moment of use ends here, in the
            # one shape every expiry has; the entry answers this syscall as refused.
            stale = step.denial.reason is DenialReason.APPROVAL_STALE
            append = expiry(step.expire, ids.recorded_at, STALE_REASON if stale else EXPIRED_REASON)
        else:
            if self.redaction and step.denial.reason is DenialReason.PAYLOAD_INVALID:
                # A schema's message may quote the value it refused: not in the record.
                denial = step.denial.model_copy(update={"detail": REDACTED_SCHEMA_DETAIL})
                step = replace(step, denial=denial)
            append = refusal_append(
                request, step, self._kept(request.payload)[1], ids.recorded_at, ids.intent
            )
        answer = await self.store.journal(append)
        if answer.status in ("appended", "existing"):
            assert answer.entry is not None
            return result_from_entry(answer.entry)
        if answer.status == "identity_mismatch":
            raise RunOfAnotherPrincipal(request.run_id)
        return await self._history(request)

    async def _await_consent(
        self, request: AdmissionRequest, step: AwaitConsent, ids: Ids
    ) -> SyscallResult | DecisionHistory:
        if step.existing is not None:
            return _consent_answer(request, step.existing.confirmation_id)
        now = ids.recorded_at
        context = step.context
        terms = step.terms
        ttl_s = self.confirmation_ttl_s
        kept, kept_text = self._kept(request.payload)
        if terms is not None and terms.ttl_s is not None:
            ttl_s = terms.ttl_s
        record = ConfirmationRecord(
            confirmation_id=ids.confirmation,
            tenant_id=context.tenant_id,
            run_id=context.run_id,
            causal_id=context.causal_id,
            idempotency_key=request.idempotency_key,
            tool=request.tool,
            payload=kept,
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
            policy=step.policy,
        )
        answer = await self.store.request_consent(
            ConsentRequest(
                confirmation=record,
                plan_id=request.plan_id,
                payload_digest=request.payload.digest,
                payload_text=kept_text,
            )
        )
        if answer.status == "created":
            return _consent_answer(request, record.confirmation_id)
        if answer.status == "identity_mismatch":
            raise RunOfAnotherPrincipal(request.run_id)
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

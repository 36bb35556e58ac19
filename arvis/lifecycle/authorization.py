"""ToolAuthorizationService: may this exact call happen, and on what terms?

:meth:`ToolAuthorizationService.decide` is pure: given one admission request
and what the store knows of the decision's history, it applies DESIGN §4 in a
fixed order — the run bound to its principal (§10), the causal id's binding,
consent bound to its requester, the retry table (on the definition the latest
attempt was decided under), a definition changed since an attempt that may have
taken effect, the tool in the plan, the payload against its schema, the
sealed context, the policy with its capability and egress gates (on the payload
in the form the tool acts on, ``ToolPlan.acted_on``), the
consent gate, and the budgets the call would be charged to — and answers
one step. It reads nothing of the store and writes nothing (a tool's canonical
hook may look at the tool's own state, the sandbox's symlinks): the admission loop
(:mod:`arvis.lifecycle.admission`) has the store write the step, and the store
checks, atomically, that the history it was decided on is still the history.
"""

from __future__ import annotations

from typing import Any

from arvis.domain.authorization import (
    AuthorizationSnapshot,
    DenialReason,
    DenialSnapshot,
    consent_policy,
    policy_fields,
)
from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.journal import STALE_REASON
from arvis.domain.schemas import PayloadValidator
from arvis.domain.states import ConfirmationState, consent_expired
from arvis.lifecycle.policy.budgets import AmountProblem, BudgetCharge, Budgets
from arvis.lifecycle.policy.policy import PolicyQuery, ToolPolicy
from arvis.lifecycle.records import ConfirmationRecord, DecisionHistory
from arvis.lifecycle.steps import (
    AdmissionRequest,
    AnotherPrincipal,
    AuthorizationStep,
    AwaitConsent,
    Deduplicated,
    Earlier,
    InFlight,
    Proceed,
    Refuse,
)
from arvis.tools.errors import CanonicalFormRefused


class ToolAuthorizationService:
    def __init__(self, policy: ToolPolicy, clock: Clock, budgets: Budgets | None = None) -> None:
        self.policy = policy
        self.clock = clock
        self.budgets = budgets or Budgets()
        self._schemas = PayloadValidator()

    def decide(
        self,
        request: AdmissionRequest,
        history: DecisionHistory,
        earlier: Earlier | None = None,
    ) -> AuthorizationStep:
        """One step for ``request`` on ``history``. ``earlier``: the decision's latest
        attempt was decided under another plan than ``request.plan`` (a plan change
        since): the retry table reads that attempt's definition, and a tool whose
        definition changed since an attempt that may have taken effect is refused
        (``plan_retired``), never run again under another definition."""
        identity = request.identity
        key = request.idempotency_key
        definition = None if request.plan is None else request.plan.definitions.get(request.tool)

        # A run is bound to the principal that opened it: another principal learns
        # nothing of it (not its causal ids, consent or results) and writes nothing.
        if history.owner is not None and history.owner != identity.principal_id:
            return AnotherPrincipal()

        def refuse(reason: DenialReason, detail: str, **policy: Any) -> Refuse:
            denial = DenialSnapshot(
                reason=reason, detail=detail, tool=request.tool, idempotency_key=key, **policy
            )
            return Refuse(denial, history.next_attempt if reason.is_attempt else None)

        if history.bound_key is not None and history.bound_key != key:
            return refuse(
                DenialReason.CAUSAL_ID_CONFLICT,
                f"causal id {request.causal_id!r} of run {request.run_id!r} already names "
                "another decision; a corrected decision needs a new causal id",
            )
        confirmation = history.confirmation
        # Consent is bound to the principal that asked for it, in every state of the
        # confirmation (DESIGN §4): whoever else posts this decision is refused
        # before the retry table, a dedupe or a re-ask could act on that consent.
        if confirmation is not None and not confirmation.requested_for(
            identity.tenant_id, identity.principal_id, identity.actor_id
        ):
            return refuse(
                DenialReason.IDENTITY_MISMATCH,
                "consent for this action was asked by another principal; only that "
                "principal may proceed under it",
            )
        decided_under = definition if earlier is None else earlier.definition
        table = _apply_retry_table(history, decided_under)
        if table is not None:
            if isinstance(table, DenialReason):
                return refuse(table, _RETRY_DETAILS[table])
            return table
        if request.plan is None:
            return refuse(DenialReason.PLAN_UNAVAILABLE, "the run's tool plan is not available")
        if (
            earlier is not None
            and _may_have_taken_effect(history)
            and not _same(earlier.definition, definition)
        ):
            return refuse(DenialReason.PLAN_RETIRED, _PLAN_RETIRED_DETAIL)
        if definition is None:
            return refuse(DenialReason.UNKNOWN_TOOL, f"tool {request.tool!r} is not in the plan")
        problem = self.schema_problem(definition, request.payload.value)
        if problem is not None:
            return refuse(DenialReason.PAYLOAD_INVALID, problem)

        # Sealed from values validated at the boundary (the identity, the syscall's
        # ids, the leased plan): constructed, not validated again.
        context = AuthorizedEffectContext.model_construct(
            tenant_id=identity.tenant_id,
            principal_id=identity.principal_id,
            auth_method=identity.method,
            key_id=identity.key_id,
            roles=identity.roles,
            issuer=identity.issuer,
            actor=identity.actor,
            run_id=request.run_id,
            causal_id=request.causal_id,
            plan_id=request.plan_id,
            instance_id=request.instance_id,
        )
        now = self.clock.now()
        # -- policy decides on what the tool acts on (DESIGN §10, issue 23) --------------
        try:
            acted_on = request.plan.acted_on(definition.name, request.payload)
        except CanonicalFormRefused as exc:
            return refuse(DenialReason.PAYLOAD_INVALID, exc.message)
        decision = self.policy.evaluate(
            PolicyQuery(
                context,
                definition,
                acted_on,
                destination=request.plan.destination(request.tool),
                attempt=history.next_attempt,
                now=now,
            )
        )
        # -- end of the policy's input ---------------------------------------------------
        versions = policy_fields(decision)
        if not decision.allowed:
            assert decision.reason is not None
            return refuse(decision.reason, decision.detail, **versions)
        if decision.consent_required:
            gate = self._consent_gate(
                context,
                confirmation,
                history,
                (definition.fingerprint, decision.policy_digest),
            )
            if isinstance(gate, tuple):
                reason, expired = gate
                refusal = refuse(reason, _CONSENT_DETAILS[reason])
                return Refuse(refusal.denial, refusal.attempt, expire=expired)
            if isinstance(gate, AwaitConsent) and gate.existing is None:
                return AwaitConsent(
                    context,
                    None,
                    terms=decision.approval,
                    definition_fingerprint=definition.fingerprint,
                    policy_digest=decision.policy_digest,
                    policy=consent_policy(decision),
                )
            if gate is not None:
                return gate
        charges: tuple[BudgetCharge, ...] = ()
        if self.budgets:
            charged = self.budgets.charges(
                identity.tenant_id,
                identity.principal_id,
                definition.name,
                request.payload.value,
                now,
            )
            if isinstance(charged, AmountProblem):
                return refuse(DenialReason.PAYLOAD_INVALID, charged.detail, **versions)
            charges = charged
        snapshot = AuthorizationSnapshot.model_construct(
            context=context,
            tool=definition.name,
            definition_fingerprint=definition.fingerprint,
            payload_digest=request.payload.digest,
            idempotency_key=key,
            attempt=history.next_attempt,
            confirmation_id=(
                confirmation.confirmation_id
                if confirmation is not None and decision.consent_required
                else None
            ),
            **versions,
        )
        return Proceed(snapshot, confirmation if decision.consent_required else None, charges)

    def schema_problem(self, definition: ToolDefinition, value: Any) -> str | None:
        """In bounded time (DESIGN §10): see :mod:`arvis.domain.schemas`."""
        return self._schemas.problem(definition, value)

    def _consent_gate(
        self,
        context: AuthorizedEffectContext,
        confirmation: ConfirmationRecord | None,
        history: DecisionHistory,
        in_force: tuple[str, str],
    ) -> AwaitConsent | InFlight | tuple[DenialReason, ConfirmationRecord | None] | None:
        """The consent gate: ask, wait, refuse (with the confirmation to mark expired,
        when it became unusable only now), or go on (None)."""
        if confirmation is None:
            return AwaitConsent(context, None)
        state = confirmation.state
        # One clock: the database's, as it read the history (the clock the admitting
        # statement checks it by). A history read without it (none of the store's)
        # leaves expiry to that statement, which answers 'stale' for a lapsed consent.
        if history.read_at is not None and consent_expired(
            state, confirmation.expires_at, history.read_at
        ):
            return DenialReason.CONFIRMATION_EXPIRED, confirmation
        if state is ConfirmationState.PENDING:
            return AwaitConsent(context, confirmation)
        if state is ConfirmationState.DENIED:
            return DenialReason.CONFIRMATION_DENIED, None
        if state is ConfirmationState.EXPIRED:
            if confirmation.decision_reason == STALE_REASON:
                return DenialReason.APPROVAL_STALE, None
            return DenialReason.CONFIRMATION_EXPIRED, None
        if state is ConfirmationState.APPROVED and _stale(confirmation, in_force):
            # Approved for another definition or policy than the one in force now:
            # the approval does not cover this call (issue 16, re-check at use).
            return DenialReason.APPROVAL_STALE, confirmation
        if state is ConfirmationState.RESERVED:
            return InFlight()
        # APPROVED: reserve it. CONSUMED: consent was given for this very action and
        # the retry table has already decided that another attempt is allowed.
        return None


def _stale(confirmation: ConfirmationRecord, in_force: tuple[str, str]) -> bool:
    fingerprint, digest = in_force
    # Confirmations asked before revision 0006 recorded neither: nothing to compare.
    return (
        confirmation.definition_fingerprint is not None
        and confirmation.definition_fingerprint != fingerprint
    ) or (confirmation.policy_digest is not None and confirmation.policy_digest != digest)


def budget_refusal(step: Proceed, budget: str) -> Refuse:
    """The refusal of an authorized attempt that the store found over ``budget``.

    The policy allowed the call, so its snapshot's policy is recorded with the denial.
    """
    snapshot = step.snapshot
    charge = next(c for c in step.charges if c.budget == budget)
    return Refuse(
        DenialSnapshot(
            reason=DenialReason.BUDGET_EXCEEDED,
            detail=(
                f"budget {budget!r} ({charge.terms}) is spent; "
                f"it resets at {charge.resets_at:%Y-%m-%dT%H:%M:%SZ}"
            ),
            tool=snapshot.tool,
            idempotency_key=snapshot.idempotency_key,
            **policy_fields(snapshot),
            budget=budget,
            resets_at=charge.resets_at,
        ),
        snapshot.attempt,
    )


def _apply_retry_table(
    history: DecisionHistory, definition: ToolDefinition | None
) -> Deduplicated | InFlight | DenialReason | None:
    """DESIGN §4, given the decision's latest attempt."""
    if history.in_flight is not None:
        return InFlight()
    latest = history.latest
    if latest is None or latest.boundary.retry_is_free:
        return None
    if latest.boundary is EffectBoundary.EFFECT_COMPLETED:
        return Deduplicated(latest.position)
    if latest.boundary is EffectBoundary.EFFECT_FAILED:
        return None if latest.retryable else DenialReason.RETRY_NOT_ADVISED
    # An uncertain attempt someone resolved reads as what they said it did (issue 16):
    # not started ⇒ a fresh attempt; completed ⇒ its record; failed ⇒ no retry advice.
    if latest.resolved is EffectBoundary.EFFECT_NOT_STARTED:
        return None
    if latest.resolved is EffectBoundary.EFFECT_COMPLETED:
        return Deduplicated(latest.position, latest.resolution_position)
    if latest.resolved is EffectBoundary.EFFECT_FAILED:
        return DenialReason.RETRY_NOT_ADVISED
    # EFFECT_STARTED or EFFECT_STATE_UNKNOWN: only a tool that dedupes may go again.
    if definition is not None and definition.replay_safety is not ReplaySafety.UNSAFE:
        return None
    return DenialReason.RETRY_PROHIBITED_UNCERTAIN


def needs_earlier(history: DecisionHistory) -> bool:
    """Whether :meth:`ToolAuthorizationService.decide` reads the definition the latest
    attempt ran under: the retry table's verdict depends on it (an uncertain outcome
    nobody resolved), or it may let a new attempt follow one that may have taken
    effect (a failure with retry advice). A record, a refusal, or an attempt that
    provably never ran is decided without it."""
    latest = history.latest
    if latest is None:
        return False
    if latest.boundary is EffectBoundary.EFFECT_FAILED:
        return latest.retryable
    return latest.boundary.uncertain and latest.resolved is None


def _may_have_taken_effect(history: DecisionHistory) -> bool:
    """The latest attempt (which the retry table let go again) may have had an effect:
    it failed with retry advice, or its outcome is uncertain and nobody resolved it as
    not started."""
    latest = history.latest
    return (
        latest is not None
        and not latest.boundary.retry_is_free
        and latest.resolved is not EffectBoundary.EFFECT_NOT_STARTED
    )


def _same(before: ToolDefinition | None, now: ToolDefinition | None) -> bool:
    return before is not None and now is not None and before.fingerprint == now.fingerprint


_PLAN_RETIRED_DETAIL = (
    "the tool's definition changed (or the tool left the plan) since an earlier attempt of "
    "this decision, which may have taken effect: it is not run again under another "
    "definition; reconcile by hand, then decide again under a new causal id"
)
_RETRY_DETAILS = {
    DenialReason.RETRY_NOT_ADVISED: "the previous attempt failed and the tool did not advise retry",
    DenialReason.RETRY_PROHIBITED_UNCERTAIN: (
        "the previous attempt may have taken effect and the tool is not replay-safe; "
        "reconcile by hand, then decide again under a new causal id"
    ),
}
_CONSENT_DETAILS = {
    DenialReason.CONFIRMATION_DENIED: "an approver denied this action",
    DenialReason.CONFIRMATION_EXPIRED: "the confirmation for this action expired",
    DenialReason.APPROVAL_STALE: (
        "the tool's definition or the policy changed since consent was asked; the "
        "approval does not cover this call: post it under a new causal id to ask again"
    ),
}

"""ToolAuthorizationService: may this exact call happen, and on what terms?

One pass inside the admission unit of work: the tool in the run's plan, the
payload against its schema, the sealed context, the idempotency key and the
retry table of DESIGN §4, the policy, the egress gate and the consent gate.
It mints nothing; the :class:`~arvis.lifecycle.manager.ToolManager` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from arvis.domain.authorization import AuthorizationSnapshot, DenialReason, DenialSnapshot
from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.identity import Identity
from arvis.domain.ids import CausalId, IdempotencyKey, InstanceId, PlanId, RunId
from arvis.domain.payload import FrozenEffectPayload
from arvis.lifecycle.policy import ToolPolicy
from arvis.lifecycle.ports import ActionRecord, ConfirmationRecord, LifecycleUnitOfWork
from arvis.tools.plans import ToolPlan


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    identity: Identity
    run_id: RunId
    causal_id: CausalId
    tool: str
    payload: FrozenEffectPayload
    plan: ToolPlan | None
    """None when the run's plan could not be leased."""
    plan_id: PlanId
    instance_id: InstanceId

    @property
    def idempotency_key(self) -> IdempotencyKey:
        return derive_idempotency_key(
            self.identity.tenant_id, self.run_id, self.causal_id, self.tool, self.payload.digest
        )


@dataclass(frozen=True, slots=True)
class Proceed:
    """Authorized: mint a capability for this attempt."""

    snapshot: AuthorizationSnapshot
    action: ActionRecord
    confirmation: ConfirmationRecord | None
    """The approved confirmation to reserve, if consent was needed."""


@dataclass(frozen=True, slots=True)
class Refuse:
    denial: DenialSnapshot
    action: ActionRecord

    @property
    def attempt(self) -> int | None:
        """The attempt number this refusal takes, or None when it is not an attempt."""
        return self.action.attempts + 1 if self.denial.reason.is_attempt else None


@dataclass(frozen=True, slots=True)
class Deduplicated:
    action: ActionRecord


@dataclass(frozen=True, slots=True)
class InFlight:
    action: ActionRecord


@dataclass(frozen=True, slots=True)
class AwaitConsent:
    action: ActionRecord
    context: AuthorizedEffectContext
    existing: ConfirmationRecord | None


AuthorizationStep = Proceed | Refuse | Deduplicated | InFlight | AwaitConsent


class ToolAuthorizationService:
    def __init__(self, policy: ToolPolicy, clock: Clock) -> None:
        self.policy = policy
        self.clock = clock
        # Definitions are immutable and fingerprinted: compile each schema once.
        self._validators: dict[str, Draft202012Validator] = {}

    async def authorize(
        self, uow: LifecycleUnitOfWork, request: AdmissionRequest
    ) -> AuthorizationStep:
        identity = request.identity
        key = request.idempotency_key
        action = await uow.actions.claim(
            identity.tenant_id,
            key,
            request.run_id,
            request.causal_id,
            request.tool,
            request.payload.digest,
        )
        definition = None if request.plan is None else request.plan.definitions.get(request.tool)

        def refuse(reason: DenialReason, detail: str) -> Refuse:
            return Refuse(
                DenialSnapshot(
                    reason=reason, detail=detail, tool=request.tool, idempotency_key=key
                ),
                action,
            )

        # Consent is bound to the principal that asked for it, in every state of the
        # confirmation (DESIGN §4): whoever else posts this decision is refused
        # before the retry table, a dedupe or a re-ask could act on that consent.
        confirmation = await uow.confirmations.get(identity.tenant_id, key, for_update=True)
        if confirmation is not None and not confirmation.requested_for(
            identity.tenant_id, identity.principal_id
        ):
            return refuse(
                DenialReason.IDENTITY_MISMATCH,
                "consent for this action was asked by another principal; only that "
                "principal may proceed under it",
            )
        earlier = _apply_retry_table(action, definition)
        if earlier is not None:
            if isinstance(earlier, DenialReason):
                return refuse(earlier, _RETRY_DETAILS[earlier])
            return earlier
        if request.plan is None:
            return refuse(DenialReason.PLAN_UNAVAILABLE, "the run's tool plan is not available")
        if definition is None:
            return refuse(DenialReason.UNKNOWN_TOOL, f"tool {request.tool!r} is not in the plan")
        problem = self.schema_problem(definition, request.payload.value)
        if problem is not None:
            return refuse(DenialReason.PAYLOAD_INVALID, problem)

        context = AuthorizedEffectContext(
            tenant_id=identity.tenant_id,
            principal_id=identity.principal_id,
            auth_method=identity.method,
            key_id=identity.key_id,
            roles=identity.roles,
            run_id=request.run_id,
            causal_id=request.causal_id,
            plan_id=request.plan_id,
            instance_id=request.instance_id,
        )
        destination = request.plan.destination(request.tool)
        decision = self.policy.evaluate(
            context, definition, request.payload, destination=destination
        )
        if not decision.allowed:
            assert decision.reason is not None
            return Refuse(
                DenialSnapshot(
                    reason=decision.reason,
                    detail=decision.detail,
                    tool=request.tool,
                    idempotency_key=key,
                    policy_version=decision.policy_version,
                    policy_digest=decision.policy_digest,
                ),
                action,
            )

        if decision.consent_required:
            gate = await self._consent_gate(uow, action, context, confirmation)
            if gate is not None:
                if isinstance(gate, DenialReason):
                    return refuse(gate, _CONSENT_DETAILS[gate])
                return gate
        snapshot = AuthorizationSnapshot(
            context=context,
            tool=definition.name,
            definition_fingerprint=definition.fingerprint,
            payload_digest=request.payload.digest,
            idempotency_key=key,
            attempt=action.attempts + 1,
            policy_version=decision.policy_version,
            policy_digest=decision.policy_digest,
            confirmation_id=(
                confirmation.confirmation_id
                if confirmation is not None and decision.consent_required
                else None
            ),
        )
        reserve = (
            confirmation
            if confirmation is not None
            and decision.consent_required
            and confirmation.state == "APPROVED"
            else None
        )
        return Proceed(snapshot, action, reserve)

    def schema_problem(self, definition: ToolDefinition, value: Any) -> str | None:
        validator = self._validators.get(definition.fingerprint)
        if validator is None:
            validator = Draft202012Validator(definition.input_schema)
            self._validators[definition.fingerprint] = validator
        error = next(iter(validator.iter_errors(value)), None)
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        return f"payload does not match the input schema at {where}: {error.message[:300]}"

    async def _consent_gate(
        self,
        uow: LifecycleUnitOfWork,
        action: ActionRecord,
        context: AuthorizedEffectContext,
        confirmation: ConfirmationRecord | None,
    ) -> AwaitConsent | InFlight | DenialReason | None:
        if confirmation is None:
            return AwaitConsent(action, context, None)
        state = confirmation.state
        if state in ("PENDING", "APPROVED") and confirmation.expires_at <= self.clock.now():
            await uow.confirmations.transition(
                confirmation.tenant_id, confirmation.confirmation_id, (state,), "EXPIRED"
            )
            return DenialReason.CONFIRMATION_EXPIRED
        if state == "PENDING":
            return AwaitConsent(action, context, confirmation)
        if state == "DENIED":
            return DenialReason.CONFIRMATION_DENIED
        if state == "EXPIRED":
            return DenialReason.CONFIRMATION_EXPIRED
        if state == "RESERVED":
            return InFlight(action)
        # APPROVED: reserve it. CONSUMED: consent was given for this very action and
        # the retry table has already decided that another attempt is allowed.
        return None


def _apply_retry_table(
    action: ActionRecord, definition: ToolDefinition | None
) -> Deduplicated | InFlight | DenialReason | None:
    """DESIGN §4, given the latest attempt of this idempotency key."""
    if action.in_flight:
        return InFlight(action)
    last = action.last_boundary
    if last is None or last.retry_is_free:
        return None
    if last is EffectBoundary.EFFECT_COMPLETED:
        return Deduplicated(action)
    if last is EffectBoundary.EFFECT_FAILED:
        return None if action.last_retryable else DenialReason.RETRY_NOT_ADVISED
    # EFFECT_STARTED or EFFECT_STATE_UNKNOWN: only a tool that dedupes may go again.
    if definition is not None and definition.replay_safety is not ReplaySafety.UNSAFE:
        return None
    return DenialReason.RETRY_PROHIBITED_UNCERTAIN


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
}

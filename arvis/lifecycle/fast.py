"""The hot path of admission: a first attempt, authorized in memory, admitted in one
statement (DESIGN §2 step 1 for the common case).

Everything the general path checks that does not need the database — the tool in
the run's plan, the payload against its schema, the policy, no consent needed —
is checked here first. The store's ``arvis_admit`` then does, in one statement
and one commit, what the general path does in one transaction: bind the run,
claim the action as new, mint, write the intent with its receipt, activate and
consume. If the action has any history, or the run is bound to another plan, it
writes nothing and answers so; the caller then takes the general path, which
applies the retry table, consent and refusals with the database state in hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    CapabilityId,
    CausalId,
    InstanceId,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)
from arvis.domain.payload import FrozenEffectPayload
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.effects import not_dispatched
from arvis.lifecycle.errors import InvalidReceipt
from arvis.lifecycle.manager import ToolManager
from arvis.lifecycle.outbox import IntentOutboxService
from arvis.lifecycle.ports import FastPath
from arvis.tools.outcome import DispatchOutcome
from arvis.tools.plans import PlanLease

# Runs are bound to a plan for ever, so the binding can be remembered; bounded
# so a long-lived instance does not grow without limit.
_REMEMBERED_RUNS = 100_000


@dataclass(frozen=True, slots=True)
class Admitted:
    """An attempt whose admission committed: run it, then journal it."""

    intent: Intent
    receipt: AuditReceipt
    lease: PlanLease
    blocked: DispatchOutcome | None = None
    """Set when the attempt was admitted but must not run (its receipt failed the
    check after the commit): it is journaled with this outcome instead."""


class FastAdmission:
    def __init__(
        self,
        fast: FastPath,
        authorization: ToolAuthorizationService,
        manager: ToolManager,
        outbox: IntentOutboxService,
    ) -> None:
        self.fast = fast
        self.authorization = authorization
        self.manager = manager
        self.outbox = outbox
        self._run_plans: dict[tuple[TenantId, RunId], PlanId] = {}

    async def try_admit(
        self,
        *,
        identity: Identity,
        run_id: RunId,
        causal_id: CausalId,
        tool: str,
        payload: FrozenEffectPayload,
        lease: PlanLease,
        capability_id: str,
        intent_id: str,
        instance_id: InstanceId,
    ) -> Admitted | None:
        """Admit in one statement, or None: take the general path."""
        plan = lease.plan
        run_key = (identity.tenant_id, run_id)
        bound = self._run_plans.get(run_key)
        if bound is not None and bound != plan.plan_id:
            return None
        definition = plan.definitions.get(tool)
        if definition is None:
            return None
        if self.authorization.schema_problem(definition, payload.value) is not None:
            return None
        context = AuthorizedEffectContext(
            tenant_id=identity.tenant_id,
            principal_id=identity.principal_id,
            auth_method=identity.method,
            key_id=identity.key_id,
            roles=identity.roles,
            run_id=run_id,
            causal_id=causal_id,
            plan_id=plan.plan_id,
            instance_id=instance_id,
        )
        destination = plan.destination(tool)
        decision = self.authorization.policy.evaluate(
            context, definition, payload, destination=destination
        )
        if not decision.allowed or decision.consent_required:
            return None
        intent = Intent(
            intent_id=IntentId(intent_id),
            context=context,
            tool=tool,
            plan_id=plan.plan_id,
            payload=payload,
            idempotency_key=derive_idempotency_key(
                identity.tenant_id, run_id, causal_id, tool, payload.digest
            ),
            attempt=1,
            capability_id=CapabilityId(capability_id),
        )
        commitment = intent.commitment
        answer = await self.fast.admit(
            tenant_id=identity.tenant_id,
            run_id=run_id,
            plan_id=plan.plan_id,
            causal_id=causal_id,
            idempotency_key=intent.idempotency_key,
            tool=tool,
            payload_digest=payload.digest,
            capability_id=capability_id,
            manager_id=self.manager.manager_id,
            intent_id=intent_id,
            payload_text=payload.canonical.decode(),
            commitment=commitment,
            context_json=context.model_dump_json(),
            instance_id=instance_id,
        )
        if answer.status == "plan_mismatch":
            self._remember(run_key, PlanId(answer.run_plan or ""))
            return None
        self._remember(run_key, plan.plan_id)
        if answer.status != "admitted":
            return None
        assert answer.receipt_position is not None
        receipt = AuditReceipt(
            intent_commitment=commitment,
            run_id=run_id,
            causal_id=causal_id,
            position=answer.receipt_position,
            store_fingerprint=self.outbox.store_fingerprint,
        )
        # The same check as every other receipt's. It runs after the commit, so a
        # failure here cannot undo the admission; it stops the tool from running,
        # and the attempt is journaled as not started.
        try:
            self.outbox.check(receipt, intent)
        except InvalidReceipt as exc:
            return Admitted(intent, receipt, lease, blocked=not_dispatched(exc.code, exc.message))
        return Admitted(intent, receipt, lease)

    def _remember(self, run_key: tuple[TenantId, RunId], plan_id: PlanId) -> None:
        self._run_plans[run_key] = plan_id
        if len(self._run_plans) > _REMEMBERED_RUNS:
            self._run_plans.pop(next(iter(self._run_plans)))

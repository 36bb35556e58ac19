"""EffectDispatcher: the receipt activates the capability, one conditional update
consumes it, and the frozen invocation runs with no transaction open."""

from __future__ import annotations

import logging

from arvis.domain.artifacts import AuditReceipt, Intent
from arvis.domain.ids import CallId
from arvis.lifecycle.errors import CapabilityError
from arvis.lifecycle.ports import LifecycleUnitOfWork
from arvis.tools.base import ToolInvocation
from arvis.tools.errors import DispatchFailure
from arvis.tools.layers import Dispatcher
from arvis.tools.outcome import DispatchOutcome

log = logging.getLogger(__name__)


class EffectDispatcher:
    def __init__(self, manager_id: str, default_deadline_s: float) -> None:
        self.manager_id = manager_id
        self.default_deadline_s = default_deadline_s

    async def activate_and_consume(
        self, uow: LifecycleUnitOfWork, intent: Intent, receipt: AuditReceipt
    ) -> None:
        tenant = intent.context.tenant_id
        # A reused durable position violates the unique receipt column here and
        # aborts the admission transaction.
        if not await uow.capabilities.activate(tenant, intent.capability_id, receipt.position):
            raise CapabilityError(f"capability {intent.capability_id} was not MINTED")
        if not await uow.capabilities.consume(tenant, intent.capability_id, self.manager_id):
            raise CapabilityError(f"capability {intent.capability_id} was not ACTIVE for us")

    async def dispatch(self, dispatcher: Dispatcher, intent: Intent) -> DispatchOutcome:
        """Run the frozen invocation. Call only after the admission has committed."""
        invocation = ToolInvocation(
            tool=intent.tool,
            payload=intent.payload,
            context=intent.context,
            idempotency_key=intent.idempotency_key,
            call_id=CallId(intent.intent_id),
        )
        try:
            return await dispatcher.dispatch(invocation, deadline_s=self.default_deadline_s)
        except DispatchFailure as failure:
            # Reporting and execution both failed: the execution's classification
            # is what happened to the effect.
            return DispatchOutcome(failure=failure.failure)

"""ToolManager: approvers' decisions on confirmations (DESIGN §4).

Each decision is one store step: the confirmation's conditional transition and
the run's journal entry that records who decided, how they authenticated, why
and when, together. The public calls that would skip the governed path exist
only to fail closed (DESIGN §2).
"""

from __future__ import annotations

from typing import Any, NoReturn

from arvis.domain.clock import Clock
from arvis.domain.errors import ForbiddenRoute
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, TenantId
from arvis.domain.journal import ConsentArtifact, Decider
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.errors import ConfirmationStateConflict, NotFound, SelfApproval
from arvis.lifecycle.ports import (
    ConfirmationChange,
    ConfirmationRecord,
    JournalAppend,
    LifecycleStore,
)

_DECIDABLE = {
    ConfirmationState.APPROVED: (ConfirmationState.PENDING,),
    ConfirmationState.DENIED: (ConfirmationState.PENDING, ConfirmationState.APPROVED),
}
_USABLE = (ConfirmationState.PENDING, ConfirmationState.APPROVED)


class ToolManager:
    def __init__(
        self, store: LifecycleStore, clock: Clock, *, allow_self_approval: bool = False
    ) -> None:
        self.store = store
        self.clock = clock
        self.allow_self_approval = allow_self_approval

    async def approve(
        self, approver: Identity, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord:
        """PENDING → APPROVED, by someone other than the requester unless the
        deployment allows self-approval; recorded with the approver's identity."""
        return await self._decide(approver, confirmation_id, ConfirmationState.APPROVED, None)

    async def deny(
        self, approver: Identity, confirmation_id: ConfirmationId, reason: str | None
    ) -> ConfirmationRecord:
        """PENDING or APPROVED → DENIED. A requester may withdraw their own request."""
        return await self._decide(approver, confirmation_id, ConfirmationState.DENIED, reason)

    async def _decide(
        self,
        approver: Identity,
        confirmation_id: ConfirmationId,
        to: ConfirmationState,
        reason: str | None,
    ) -> ConfirmationRecord:
        current = await self.confirmation(approver.tenant_id, confirmation_id)
        now = self.clock.now()
        if current.state in _USABLE and current.expires_at <= now:
            await self.store.expire_confirmation(current.tenant_id, confirmation_id, _USABLE)
            raise ConfirmationStateConflict(f"confirmation {confirmation_id} has expired")
        allowed_from = _DECIDABLE[to]
        if current.state not in allowed_from:
            raise ConfirmationStateConflict(
                f"confirmation {confirmation_id} is {current.state}; cannot become {to}"
            )
        if (
            to is ConfirmationState.APPROVED
            and not self.allow_self_approval
            and approver.same_principal(current.tenant_id, current.requested_by)
        ):
            raise SelfApproval(
                "the requester of this action may not approve it; another approver must"
            )
        answer = await self.store.journal(
            JournalAppend(
                tenant_id=current.tenant_id,
                run_id=current.run_id,
                causal_id=current.causal_id,
                idempotency_key=current.idempotency_key,
                attempt=None,
                intent_id=None,
                boundary=None,
                retryable=False,
                artifact=ConsentArtifact(
                    confirmation_id=confirmation_id,
                    decision=to,
                    tool=current.tool,
                    requested_by=current.requested_by,
                    decided_by=Decider(
                        principal_id=approver.principal_id,
                        auth_method=approver.method,
                        key_id=approver.key_id,
                    ),
                    reason=reason,
                ),
                recorded_at=now,
                confirmation=ConfirmationChange(
                    confirmation_id=confirmation_id,
                    from_states=allowed_from,
                    to_state=to,
                    strict=True,
                    decided_by=f"{approver.principal_id} ({approver.method}:"
                    f"{approver.key_id or '-'})",
                    reason=reason,
                ),
            )
        )
        if answer.status != "appended":
            latest = await self.confirmation(approver.tenant_id, confirmation_id)
            raise ConfirmationStateConflict(
                f"confirmation {confirmation_id} is {latest.state}; cannot become {to}"
            )
        return await self.confirmation(approver.tenant_id, confirmation_id)

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord:
        async with self.store.reading() as reads:
            found = await reads.confirmation(tenant_id, confirmation_id)
        if found is None:
            raise NotFound(f"no confirmation {confirmation_id}")
        return found

    async def list_confirmations(
        self,
        tenant_id: TenantId,
        state: ConfirmationState | str | None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[ConfirmationRecord]:
        wanted = None if state is None else ConfirmationState(state)
        async with self.store.reading() as reads:
            return await reads.confirmations(tenant_id, wanted, limit, after)

    # -- routes that do not exist ------------------------------------------

    def run(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.run")

    def execute_authorized(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.execute_authorized")

    def activate_authorized(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.activate_authorized")


class ToolExecutor:
    """Exists only so that code reaching for a direct executor fails closed."""

    def execute_invocation(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolExecutor.execute_invocation")

    def execute(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolExecutor.execute")

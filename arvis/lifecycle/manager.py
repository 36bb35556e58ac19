"""ToolManager: confirmations, and the registered single-use capability.

The manager mints one capability per authorized attempt and remembers which
ones it minted, so the syscall handler can refuse a capability that is not
its own. The public calls that would skip the governed path exist only to fail
closed (DESIGN §2).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from arvis.domain.authorization import Authorized
from arvis.domain.clock import Clock
from arvis.domain.errors import ForbiddenRoute
from arvis.domain.identity import Identity
from arvis.domain.ids import CapabilityId, ConfirmationId, TenantId
from arvis.domain.payload import FrozenEffectPayload
from arvis.lifecycle import journal
from arvis.lifecycle.authorization import AwaitConsent, Proceed
from arvis.lifecycle.errors import (
    CapabilityError,
    ConfirmationStateConflict,
    NotFound,
    SelfApproval,
)
from arvis.lifecycle.ports import ConfirmationRecord, LifecycleStore, LifecycleUnitOfWork

DEFAULT_CONFIRMATION_TTL = timedelta(hours=24)
# "Did I mint this?" is asked right after minting, in the same admission; a
# small window is enough and keeps a long-lived instance's memory flat.
_REMEMBERED_MINTS = 1024


class ToolManager:
    def __init__(
        self,
        store: LifecycleStore,
        clock: Clock,
        manager_id: str,
        confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL,
        *,
        allow_self_approval: bool = False,
    ) -> None:
        self.store = store
        self.clock = clock
        self.manager_id = manager_id
        self.confirmation_ttl = confirmation_ttl
        self.allow_self_approval = allow_self_approval
        self._minted: dict[CapabilityId, None] = {}

    # -- capabilities -------------------------------------------------------

    async def authorize(
        self, uow: LifecycleUnitOfWork, step: Proceed, capability_id: CapabilityId
    ) -> Authorized:
        """Mint the capability for an authorized attempt and reserve its consent."""
        snapshot = step.snapshot
        context = snapshot.context
        await uow.capabilities.mint(
            context.tenant_id,
            capability_id,
            context.run_id,
            snapshot.idempotency_key,
            snapshot.attempt,
            self.manager_id,
        )
        self.remember(capability_id)
        if step.confirmation is not None:
            reserved = await uow.confirmations.transition(
                context.tenant_id, step.confirmation.confirmation_id, ("APPROVED",), "RESERVED"
            )
            if not reserved:
                raise CapabilityError("the approved confirmation could not be reserved")
        return Authorized(snapshot=snapshot, capability_id=capability_id)

    def owns(self, capability_id: CapabilityId) -> bool:
        return capability_id in self._minted

    def remember(self, capability_id: CapabilityId) -> None:
        """Record a capability this manager minted (also through the hot path)."""
        self._minted[capability_id] = None
        if len(self._minted) > _REMEMBERED_MINTS:
            self._minted.pop(next(iter(self._minted)))

    async def revoke(
        self,
        uow: LifecycleUnitOfWork,
        tenant_id: TenantId,
        capability_id: CapabilityId,
        reason: str,
    ) -> None:
        if not await uow.capabilities.revoke(tenant_id, capability_id, reason):
            raise CapabilityError(f"capability {capability_id} could not be revoked")

    async def release(
        self, uow: LifecycleUnitOfWork, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> None:
        """RESERVED → APPROVED: only when the effect provably did not start."""
        await uow.confirmations.transition(tenant_id, confirmation_id, ("RESERVED",), "APPROVED")

    # -- confirmations ------------------------------------------------------

    async def request_confirmation(
        self,
        uow: LifecycleUnitOfWork,
        step: AwaitConsent,
        payload: FrozenEffectPayload,
        confirmation_id: ConfirmationId,
    ) -> ConfirmationRecord:
        """The PENDING confirmation for this action, created on first request."""
        if step.existing is not None:
            return step.existing
        now = self.clock.now()
        context = step.context
        record = ConfirmationRecord(
            confirmation_id=confirmation_id,
            tenant_id=context.tenant_id,
            run_id=context.run_id,
            causal_id=context.causal_id,
            idempotency_key=step.action.idempotency_key,
            tool=step.action.tool,
            payload=payload.value,
            state="PENDING",
            context=context.model_dump(mode="json"),
            decided_by=None,
            decision_reason=None,
            decided_at=None,
            expires_at=now + self.confirmation_ttl,
            created_at=now,
        )
        return await uow.confirmations.create_pending(record, payload.digest)

    async def approve(
        self, approver: Identity, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord:
        """PENDING → APPROVED, by someone other than the requester unless the
        deployment allows self-approval; recorded with the approver's identity."""
        return await self._decide(approver, confirmation_id, "APPROVED", None)

    async def deny(
        self, approver: Identity, confirmation_id: ConfirmationId, reason: str | None
    ) -> ConfirmationRecord:
        """PENDING or APPROVED → DENIED. A requester may withdraw their own request."""
        return await self._decide(approver, confirmation_id, "DENIED", reason)

    async def _decide(
        self, approver: Identity, confirmation_id: ConfirmationId, to: str, reason: str | None
    ) -> ConfirmationRecord:
        allowed_from = ("PENDING",) if to == "APPROVED" else ("PENDING", "APPROVED")
        async with self.store.unit_of_work() as uow:
            current = await uow.confirmations.by_id(
                approver.tenant_id, confirmation_id, for_update=True
            )
            if current is None:
                raise NotFound(f"no confirmation {confirmation_id}")
            now = self.clock.now()
            if current.state in ("PENDING", "APPROVED") and current.expires_at <= now:
                await uow.confirmations.transition(
                    approver.tenant_id, confirmation_id, (current.state,), "EXPIRED"
                )
                await uow.commit()
                raise ConfirmationStateConflict(f"confirmation {confirmation_id} has expired")
            if current.state not in allowed_from:
                raise ConfirmationStateConflict(
                    f"confirmation {confirmation_id} is {current.state}; cannot become {to}"
                )
            if (
                to == "APPROVED"
                and not self.allow_self_approval
                and approver.same_principal(current.tenant_id, current.requested_by)
            ):
                raise SelfApproval(
                    "the requester of this action may not approve it; another approver must"
                )
            await uow.confirmations.transition(
                approver.tenant_id,
                confirmation_id,
                allowed_from,
                to,
                decided_by=f"{approver.principal_id} ({approver.method}:{approver.key_id or '-'})",
                reason=reason,
                decided_at=now,
            )
            await journal.append(
                uow,
                tenant_id=current.tenant_id,
                run_id=current.run_id,
                kind="confirmation",
                causal_id=current.causal_id,
                idempotency_key=current.idempotency_key,
                attempt=None,
                intent_id=None,
                boundary=None,
                body={
                    "confirmation_id": confirmation_id,
                    "decision": to,
                    "tool": current.tool,
                    "requested_by": current.requested_by,
                    "decided_by": {
                        "principal_id": approver.principal_id,
                        "auth_method": approver.method,
                        "key_id": approver.key_id,
                    },
                    "reason": reason,
                },
                recorded_at=now,
            )
            updated = await uow.confirmations.by_id(
                approver.tenant_id, confirmation_id, for_update=False
            )
            await uow.commit()
        assert updated is not None
        return updated

    async def confirmation(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord:
        async with self.store.unit_of_work() as uow:
            found = await uow.confirmations.by_id(tenant_id, confirmation_id, for_update=False)
        if found is None:
            raise NotFound(f"no confirmation {confirmation_id}")
        return found

    async def list_confirmations(
        self, tenant_id: TenantId, state: str | None, limit: int = 100, after: str | None = None
    ) -> list[ConfirmationRecord]:
        async with self.store.unit_of_work() as uow:
            return await uow.confirmations.list(tenant_id, state, limit, after)

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

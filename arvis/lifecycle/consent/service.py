"""ConsentService: approvers' decisions on confirmations (DESIGN §4, issue 16).

Each decision is one store step: the confirmation's conditional transition and
the run's journal entry that records who decided, how they authenticated, why
and when, together. An approval counts toward the confirmation's quorum of
distinct approvers of its groups; a deny by any of them, or the expiry, ends it
and is journaled as a refusal of the decision.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from arvis.domain.clock import Clock
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, TenantId
from arvis.domain.journal import ConsentArtifact, Decider
from arvis.domain.states import (
    WAITING,
    ConfirmationState,
    check_confirmation_transition,
    consent_expired,
)
from arvis.lifecycle.entries import consent_end, expiry
from arvis.lifecycle.errors import (
    AlreadyApproved,
    ApproverNotInGroup,
    ConfirmationStateConflict,
    NotFound,
    NotRequester,
    SelfApproval,
)
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import ConfirmationRecord
from arvis.lifecycle.writes import ApprovalStep

_APPROVED_ALREADY = (ConfirmationState.APPROVED, ConfirmationState.CONSUMED)
# A quorum's approvals are decided on what was read; a concurrent approval makes the
# read stale, and the approval is decided again on the fresh one.
_ROUNDS = 4
WITHDRAWN = "withdrawn by the requester"
"""The reason of a deny by the requester that gave none."""


def _label(identity: Identity) -> str:
    return f"{identity.principal_id} ({identity.method}:{identity.key_id or '-'})"


def _decider(identity: Identity) -> Decider:
    return Decider(
        principal_id=identity.principal_id,
        auth_method=identity.method,
        key_id=identity.key_id,
        groups=list(identity.groups),
        actor=identity.actor_id,
    )


@dataclass(eq=False)
class ConsentService:
    store: LifecycleStore
    clock: Clock
    _: KW_ONLY
    allow_self_approval: bool = False

    async def approve(
        self, approver: Identity, confirmation_id: ConfirmationId, reason: str | None = None
    ) -> ConfirmationRecord:
        """Record one approval: by someone other than the requester unless the
        deployment allows self-approval, holding one of the tool's approver groups,
        once per principal. The confirmation becomes APPROVED when its quorum of
        distinct approvals is met; each is journaled with the approver's identity and
        the reason they gave, if any."""
        for _ in range(_ROUNDS):
            current = await self._usable(approver, confirmation_id)
            mine = any(a.principal_id == approver.principal_id for a in current.approvals)
            if mine and current.state in _APPROVED_ALREADY:
                # A retried approval whose answer was lost: it stands, say exactly that.
                raise AlreadyApproved(f"{approver.principal_id} has approved this already")
            if current.state is not ConfirmationState.PENDING:
                raise ConfirmationStateConflict(
                    f"confirmation {confirmation_id} is {current.state}; cannot be approved"
                )
            if not self.allow_self_approval and approver.took_part(
                current.tenant_id, current.requested_by, current.requested_actor
            ):
                raise SelfApproval(
                    "the requester of this action may not approve it; another approver must"
                )
            self._check_group(approver, current)
            if mine:
                raise AlreadyApproved(f"{approver.principal_id} has approved this already")
            count = len(current.approvals) + 1
            met = count >= current.quorum
            to = ConfirmationState.APPROVED if met else ConfirmationState.PENDING
            if met:
                check_confirmation_transition(current.state, to)
            answer = await self.store.approve(
                ApprovalStep(
                    confirmation=current,
                    approver_principal=approver.principal_id,
                    approver_method=approver.method,
                    approver_key_id=approver.key_id,
                    approver_groups=approver.groups,
                    seen=len(current.approvals),
                    to_state=to,
                    decided_by=_label(approver) if met else None,
                    artifact=ConsentArtifact(
                        confirmation_id=confirmation_id,
                        decision=ConfirmationState.APPROVED,
                        tool=current.tool,
                        requested_by=current.requested_by,
                        requested_actor=current.requested_actor,
                        decided_by=_decider(approver),
                        reason=reason,
                        state=to,
                        approvals=count,
                        quorum=current.quorum,
                        round=current.round if current.round > 1 else None,
                    ),
                    recorded_at=self.clock.now(),
                )
            )
            if answer.status == "appended":
                return await self.confirmation(approver.tenant_id, confirmation_id)
            if answer.status == "duplicate":
                raise AlreadyApproved(f"{approver.principal_id} has approved this already")
            if answer.status == "expired":
                await self._expire(current)
                raise ConfirmationStateConflict(f"confirmation {confirmation_id} has expired")
        raise ConfirmationStateConflict(
            f"confirmation {confirmation_id} kept changing; approve it again"
        )

    async def deny(
        self, approver: Identity, confirmation_id: ConfirmationId, reason: str | None
    ) -> ConfirmationRecord:
        """PENDING or APPROVED → DENIED, by an approver of the tool's groups (a deny by
        any one of them denies), or withdrawn by its requester, whatever their role
        (an agent may withdraw what it asked; reason ``withdrawn by the requester``
        unless it gives one). Anyone else without the approver role is refused
        :class:`NotRequester`. Journaled as a refusal of the decision: it never runs."""
        current = await self._usable(approver, confirmation_id)
        to = ConfirmationState.DENIED
        # Its requester is both halves of who asked: the agent that asked for a person,
        # not another agent for them, nor the person without it (DESIGN §7).
        requester = current.requested_for(
            approver.tenant_id, approver.principal_id, approver.actor_id
        )
        if not requester and not approver.has_role("approver"):
            raise NotRequester(
                "only the requester of this action may withdraw it; denying it needs "
                "the approver role"
            )
        if current.state not in WAITING:
            raise ConfirmationStateConflict(
                f"confirmation {confirmation_id} is {current.state}; cannot become {to}"
            )
        if requester:
            reason = reason or WITHDRAWN
        else:
            self._check_group(approver, current)
        answer = await self.store.journal(
            consent_end(
                current,
                _decider(approver),
                to,
                reason,
                self.clock.now(),
                decided_by=_label(approver),
            )
        )
        if answer.status != "appended":
            latest = await self.confirmation(approver.tenant_id, confirmation_id)
            raise ConfirmationStateConflict(
                f"confirmation {confirmation_id} is {latest.state}; cannot become {to}"
            )
        return await self.confirmation(approver.tenant_id, confirmation_id)

    async def expire_due(self, *, limit: int = 100) -> int:
        """Move every waiting confirmation that the database's clock says expired to
        EXPIRED, journaled as a refusal of its decision, so lists are true."""
        expired = 0
        for record in await self.store.expirable(limit=limit):
            if await self._expire(record):
                expired += 1
        return expired

    async def _usable(
        self, approver: Identity, confirmation_id: ConfirmationId
    ) -> ConfirmationRecord:
        current = await self.confirmation(approver.tenant_id, confirmation_id)
        # By the database's clock as it read the record (the one expiry rule).
        if current.read_at is not None and consent_expired(
            current.state, current.expires_at, current.read_at
        ):
            await self._expire(current)
            raise ConfirmationStateConflict(f"confirmation {confirmation_id} has expired")
        return current

    def _check_group(self, approver: Identity, current: ConfirmationRecord) -> None:
        if not approver.in_any_group(current.approver_groups):
            raise ApproverNotInGroup(
                f"approving {current.tool} needs a key of the group "
                f"{' or '.join(current.approver_groups)}"
            )

    async def _expire(self, current: ConfirmationRecord) -> bool:
        answer = await self.store.journal(expiry(current, self.clock.now()))
        return answer.status == "appended"

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

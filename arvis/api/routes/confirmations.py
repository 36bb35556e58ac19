"""Consent: list, approve and deny confirmations of the caller's tenant."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Depends, Path, Query

from arvis.api.schemas import (
    ApprovalOut,
    ConfirmationList,
    ConfirmationOut,
)
from arvis.domain.identity import Identity
from arvis.domain.ids import ID_PATTERN, ConfirmationId
from arvis.domain.states import ConfirmationState as ConfirmationStateValue
from arvis.domain.wire import ConfirmationState
from arvis.lifecycle.records import ConfirmationRecord
from arvis.web.bodies import DecisionBody
from arvis.web.identity import ApproverIdentity, KernelDep, require_role
from arvis.web.problems import problem_responses

router = APIRouter(tags=["confirmations"])

ConfirmationIdPath = Annotated[str, Path(pattern=ID_PATTERN, description="The confirmation's id.")]
# A deny is an approver's, or the requester's withdrawal (the service tells them apart).
DenierIdentity = Annotated[Identity, Depends(require_role("approver", "agent"))]


def _out(record: ConfirmationRecord) -> ConfirmationOut:
    return ConfirmationOut(
        id=record.confirmation_id,
        state=cast(ConfirmationState, record.state),
        run_id=record.run_id,
        causal_id=record.causal_id,
        idempotency_key=record.idempotency_key,
        tool=record.tool,
        payload=record.payload,
        decided_by=record.decided_by,
        reason=record.decision_reason,
        expires_at=record.expires_at,
        created_at=record.created_at,
        policy=None if record.policy is None else record.policy.model_dump(),
        approvers=list(record.approver_groups),
        quorum=record.quorum,
        round=record.round,
        approvals=[
            ApprovalOut(
                principal_id=a.principal_id,
                key_id=a.key_id,
                auth_method=a.auth_method,
                groups=list(a.groups),
                decided_at=a.decided_at,
                journal_position=a.position,
            )
            for a in record.approvals
        ],
    )


@router.get(
    "/v1/confirmations",
    response_model=ConfirmationList,
    responses=problem_responses(401, 403, 422, 503),
)
async def list_confirmations(
    identity: ApproverIdentity,
    kernel: KernelDep,
    state: ConfirmationState | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    after: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
) -> ConfirmationList:
    """Confirmations of this tenant, by id; filter with ``state=PENDING``."""
    found = await kernel.lifecycle.consent.list_confirmations(
        identity.tenant_id, None if state is None else ConfirmationStateValue(state), limit, after
    )
    return ConfirmationList(
        confirmations=[_out(record) for record in found],
        next_after=found[-1].confirmation_id if len(found) == limit else None,
    )


@router.post(
    "/v1/confirmations/{confirmation_id}/approve",
    response_model=ConfirmationOut,
    responses=problem_responses(400, 401, 403, 404, 409, 413, 415, 422, 503),
)
async def approve_confirmation(
    confirmation_id: ConfirmationIdPath,
    identity: ApproverIdentity,
    kernel: KernelDep,
    body: DecisionBody | None = None,
) -> ConfirmationOut:
    """Record an approval, with an optional reason (≤ 500 characters) journaled beside
    it; PENDING → APPROVED once the quorum of distinct approvers of the tool's groups
    is met. The agent then re-posts the same syscall to run it."""
    reason = body.reason if body is not None else None
    record = await kernel.lifecycle.consent.approve(
        identity, ConfirmationId(confirmation_id), reason
    )
    return _out(record)


@router.post(
    "/v1/confirmations/{confirmation_id}/deny",
    response_model=ConfirmationOut,
    responses=problem_responses(400, 401, 403, 404, 409, 413, 415, 422, 503),
)
async def deny_confirmation(
    confirmation_id: ConfirmationIdPath,
    identity: DenierIdentity,
    kernel: KernelDep,
    body: DecisionBody | None = None,
) -> ConfirmationOut:
    """PENDING or APPROVED → DENIED, with an optional reason (≤ 500 characters).

    By an approver of the tool's groups, or withdrawn by the requester (an agent key
    of the principal that asked: reason ``withdrawn by the requester`` unless given).
    Another agent: 403 ``identity_mismatch``."""
    reason = body.reason if body is not None else None
    record = await kernel.lifecycle.consent.deny(identity, ConfirmationId(confirmation_id), reason)
    return _out(record)

"""Admission outcomes that run nothing: a refusal, journaled, and a recorded answer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from arvis.domain.authorization import DenialSnapshot
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import TenantId
from arvis.lifecycle import journal
from arvis.lifecycle.authorization import AdmissionRequest
from arvis.lifecycle.ports import ActionRecord, LifecycleUnitOfWork
from arvis.lifecycle.results import SyscallResult, result_from_entry


async def journal_refusal(
    uow: LifecycleUnitOfWork,
    request: AdmissionRequest,
    denial: DenialSnapshot,
    attempt: int | None,
    recorded_at: datetime,
) -> SyscallResult:
    """Commit a PRE_EFFECT_REFUSAL with its denial snapshot, and nothing else.

    ``attempt`` is None for refusals that are not attempts (DenialReason.is_attempt):
    they are journaled but leave the action's history as the retry table saw it.
    """
    tenant = request.identity.tenant_id
    body: dict[str, Any] = {
        "tool": request.tool,
        "plan_id": request.plan_id,
        "payload_digest": request.payload.digest,
        "principal_id": request.identity.principal_id,
        "reason": denial.reason.value,
        "detail": denial.detail,
        "denial": denial.model_dump(mode="json"),
    }
    entry = await journal.append(
        uow,
        tenant_id=tenant,
        run_id=request.run_id,
        kind="refusal",
        causal_id=request.causal_id,
        idempotency_key=denial.idempotency_key,
        attempt=attempt,
        intent_id=None,
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL.value,
        body=body,
        recorded_at=recorded_at,
    )
    if attempt is not None:
        await uow.actions.record_refusal(tenant, denial.idempotency_key, attempt, entry.position)
    await uow.commit()
    return result_from_entry(entry)


async def answer_deduplicated(
    uow: LifecycleUnitOfWork, tenant_id: TenantId, action: ActionRecord
) -> SyscallResult:
    """The recorded result of a completed action: nothing minted, nothing run."""
    assert action.last_position is not None
    entry = await uow.journal.at(tenant_id, action.run_id, action.last_position)
    run = await uow.runs.get(tenant_id, action.run_id)
    assert entry is not None
    assert run is not None
    return result_from_entry(entry, outcome="deduplicated", audit_incomplete=run.audit_incomplete)

"""Admission outcomes that run nothing: a refusal, and a recorded answer."""

from __future__ import annotations

from datetime import datetime

from arvis.domain.attempt import AttemptKey
from arvis.domain.authorization import DenialReason
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import IntentId
from arvis.domain.journal import RefusalArtifact
from arvis.lifecycle.errors import ChainBroken
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.journal import recomputes
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import JournalEntry, RunRecord
from arvis.lifecycle.results import SyscallResult, result_from_entry
from arvis.lifecycle.steps import AdmissionRequest, Refuse
from arvis.lifecycle.writes import Binding, JournalAppend

# Refusals that depend on the run's plan (the tool in it, its schema, the policy
# on its definition) bind the run, and its causal id, as admission would.
_PLAN_BOUND_REFUSALS = frozenset(
    {
        DenialReason.UNKNOWN_TOOL,
        DenialReason.PAYLOAD_INVALID,
        DenialReason.POLICY_DENIED,
        DenialReason.CAPABILITY_DENIED,
        DenialReason.EGRESS_DENIED,
        DenialReason.BUDGET_EXCEEDED,
    }
)


def refusal_append(
    request: AdmissionRequest,
    step: Refuse,
    payload_text: str,
    recorded_at: datetime,
    syscall_id: IntentId,
) -> JournalAppend:
    """The PRE_EFFECT_REFUSAL entry of ``step``, with its denial snapshot, and nothing else.

    ``step.attempt`` is None for refusals that are not attempts (DenialReason.is_attempt):
    they are journaled but leave the decision's history as the retry table saw it.
    A refusal of a decision binds the run's causal id to it, except the refusal that
    says the causal id names another decision. The entry carries the refused
    syscall's intent id, so a retried append is told from a new post of the decision.
    """
    denial = step.denial
    binds = denial.reason is not DenialReason.CAUSAL_ID_CONFLICT
    return JournalAppend(
        key=AttemptKey(
            request.identity.tenant_id,
            request.run_id,
            request.causal_id,
            denial.idempotency_key,
            step.attempt,
        ),
        intent_id=syscall_id,
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        retryable=False,
        artifact=RefusalArtifact(
            tool=request.tool,
            plan_id=request.plan_id,
            payload_digest=request.payload.digest,
            principal_id=request.identity.principal_id,
            actor=request.identity.actor,
            reason=denial.reason,
            detail=denial.detail,
            denial=denial,
        ),
        recorded_at=recorded_at,
        bind=(
            Binding(
                plan_id=request.plan_id if denial.reason in _PLAN_BOUND_REFUSALS else None,
                tool=request.tool,
                payload_digest=request.payload.digest,
                payload_text=payload_text,
            )
            if binds
            else None
        ),
    )


async def answer_deduplicated(
    store: LifecycleStore,
    request: AdmissionRequest,
    position: int,
    resolution_position: int | None = None,
    evidence: EvidenceService | None = None,
) -> SyscallResult:
    """The recorded result of a completed decision: nothing minted, nothing run.

    ``resolution_position``: the decision's last attempt was uncertain and resolved
    as completed; the answer is that attempt's record with its resolution beside it.

    What is served is verified (DESIGN §10): each entry handed out must recompute its
    own hash, link to the signed checkpoint that covers it (``evidence``), and come
    from a run not flagged as broken; else ``ChainBroken`` naming the position, and
    nothing is served or recorded.
    """
    tenant_id = request.identity.tenant_id
    async with store.reading() as reads:
        entry = await reads.entry_at(tenant_id, request.run_id, position)
        resolution = (
            None
            if resolution_position is None
            else await reads.entry_at(tenant_id, request.run_id, resolution_position)
        )
        run = await reads.run(tenant_id, request.run_id)
        assert entry is not None
        assert run is not None
        served = [entry] if resolution is None else [entry, resolution]
        if evidence is not None:
            await evidence.check_served(reads, run, served)
        else:
            check_own_hashes(run, served)
    return result_from_entry(
        entry,
        outcome="deduplicated",
        audit_incomplete=run.audit_incomplete,
        resolution=resolution,
    )


def check_own_hashes(run: RunRecord, entries: list[JournalEntry]) -> None:
    """The floor of what is served: a flagged run, or an entry whose own hash does not
    recompute, is refused."""
    if run.evidence_broken_at is not None:
        raise ChainBroken(run.run_id, run.evidence_broken_at, f"{run.evidence_fault}")
    for entry in entries:
        if not recomputes(entry):
            raise ChainBroken(run.run_id, entry.position, "entry altered")

"""Resolving an uncertain attempt (issue 16). Another tenant's attempt is 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from arvis.api.routes.runs import RunPath
from arvis.api.schemas import ConsentRoundOut, ResolutionOut
from arvis.domain.journal import ResolutionArtifact
from arvis.lifecycle.consent.resolution import RESOLVED_AS
from arvis.web.bodies import ResolveBody
from arvis.web.identity import ApproverIdentity, KernelDep
from arvis.web.problems import problem_responses

router = APIRouter(tags=["runs"])

KeyPath = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="The idempotency key.")]
AttemptPath = Annotated[int, Path(ge=1, le=2**31 - 1, description="The attempt number.")]


@router.post(
    "/v1/runs/{run_id}/attempts/{idempotency_key}/{attempt}/resolve",
    response_model=ResolutionOut,
    status_code=201,
    responses=problem_responses(400, 401, 403, 404, 409, 413, 415, 422, 503),
)
async def resolve_attempt(
    run_id: RunPath,
    idempotency_key: KeyPath,
    attempt: AttemptPath,
    body: ResolveBody,
    identity: ApproverIdentity,
    kernel: KernelDep,
) -> ResolutionOut:
    """Say what an uncertain attempt (EFFECT_STARTED / EFFECT_STATE_UNKNOWN) did.

    Appends a resolution entry to the run's chain (who, from the key; when; the
    resolved boundary; the evidence; the entry it resolves, which is never changed).
    The retry table then reads the resolved boundary. Not uncertain, or resolved
    already: 409. The principal whose call it was: 403 ``self_resolution``.

    Resolved as not started, an attempt that ran under consent does not let the next
    attempt run under the consent it used up: the consent opens a new round of
    approval (``consent`` in the answer), in which this resolution counts as one
    approval when the resolver could have approved it."""
    entry = await kernel.lifecycle.resolutions.resolve(
        identity, run_id, idempotency_key, attempt, RESOLVED_AS[body.as_], body.evidence
    )
    artifact = entry.artifact
    assert isinstance(artifact, ResolutionArtifact)
    return ResolutionOut(
        run_id=entry.run_id,
        causal_id=entry.causal_id,
        idempotency_key=entry.idempotency_key,
        attempt=artifact.attempt,
        boundary=artifact.boundary.value,
        resolves=artifact.resolves.position,
        resolved_by=artifact.resolved_by.principal_id,
        evidence=artifact.evidence,
        journal_position=entry.position,
        entry_hash=entry.entry_hash,
        recorded_at=entry.recorded_at,
        consent=None
        if artifact.consent is None
        else ConsentRoundOut.model_validate(artifact.consent.model_dump(mode="json")),
    )

"""A run's signed checkpoints (issue 19). Another tenant's run is 404."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from arvis.api.routes.runs import RunPath
from arvis.web.identity import AuditorIdentity, KernelDep
from arvis.web.problems import problem_responses

router = APIRouter(tags=["runs"])


class CheckpointOut(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    length: int
    """The chain's length when signed: the head is the entry at this position."""
    head_hash: str
    signed_at: str
    """UTC, ISO 8601 with microseconds: exactly the text that was signed."""
    key_id: str
    """SHA-256 (hex) of the signing key's raw Ed25519 public key."""
    signature: str
    """Base64 of the Ed25519 signature over the preimage of docs/journal-format.md."""


class CheckpointsOut(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    checkpoints: list[CheckpointOut]
    public_key_id: str | None
    """The id of the key this deployment verifies with; null when none is configured."""


@router.get(
    "/v1/runs/{run_id}/checkpoints",
    response_model=CheckpointsOut,
    responses=problem_responses(401, 403, 404, 422, 503),
)
async def get_checkpoints(
    run_id: RunPath, identity: AuditorIdentity, kernel: KernelDep
) -> CheckpointsOut:
    """Every signed checkpoint of the run's chain head, oldest first."""
    evidence = kernel.lifecycle.evidence
    signed = await evidence.checkpoints(identity.tenant_id, run_id)
    key = evidence.key
    return CheckpointsOut(
        run_id=run_id,
        checkpoints=[
            CheckpointOut.model_validate(
                {k: v for k, v in c.as_record().items() if k not in ("tenant_id", "run_id")}
            )
            for c in signed
        ],
        public_key_id=None if key is None else key.key_id,
    )

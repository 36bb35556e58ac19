"""A run's audit bundle over HTTP (``arvis export`` in remote mode). Another tenant's
run is 404."""

from __future__ import annotations

from fastapi import APIRouter, Response

from arvis.api.routes.runs import RunPath
from arvis.domain.wire import HEAD_SIGNED_HEADER
from arvis.web.identity import AuditorIdentity, KernelDep
from arvis.web.problems import problem_responses

router = APIRouter(tags=["runs"])


@router.get(
    "/v1/runs/{run_id}/bundle",
    response_class=Response,
    responses={
        200: {
            "content": {"application/json": {"schema": {"type": "object"}}},
            "description": "The bundle (docs/journal-format.md), byte for byte as"
            " `arvis export` writes it.",
        },
        **problem_responses(401, 403, 404, 422, 503),
    },
)
async def get_bundle(run_id: RunPath, identity: AuditorIdentity, kernel: KernelDep) -> Response:
    """The run's self-contained audit bundle, with the deployment's public key embedded,
    for ``arvis verify --bundle`` on a machine with no database. ``ARVIS-Head-Signed:
    false`` says the deployment signs checkpoints but could not sign the run's head now:
    its last entries will not verify with the public key."""
    exported = await kernel.bundles.export(identity.tenant_id, run_id)
    return Response(
        exported.data,
        media_type="application/json",
        headers={HEAD_SIGNED_HEADER: "true" if exported.head_signed else "false"},
    )

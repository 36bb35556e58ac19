"""``POST /v1/syscalls``: the only HTTP route to a tool body.

It translates, and nothing else (DESIGN §10 "One edge"): the run a per-turn instance
serves, identity, metrics and the syscall's log fields are the handler's.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from arvis.domain.identity import Identity
from arvis.kernel import Kernel
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.web.identity import AgentIdentity, KernelDep, log_fields
from arvis.web.problems import problem_responses

router = APIRouter(tags=["syscalls"])


@router.post(
    "/v1/syscalls",
    response_model=SyscallResult,
    responses={
        202: {"model": SyscallResult, "description": "Consent required; nothing ran."},
        **problem_responses(400, 401, 403, 409, 413, 415, 421, 422, 503),
    },
    summary="Govern one tool.execute",
)
async def post_syscall(
    syscall: Syscall,
    identity: AgentIdentity,
    kernel: KernelDep,
    request: Request,
) -> Response:
    """Admit, run once and journal one tool call, or refuse it, or ask for consent.

    200 for `executed`, `deduplicated` and `refused`; 202 for `confirmation_required`.
    """
    return await execute(syscall, identity, kernel, log_fields(request))


async def execute(
    syscall: Syscall, identity: Identity, kernel: Kernel, fields: dict[str, str]
) -> Response:
    """The route's work, shared with its fast lane (arvis.serving.fastlane)."""
    result = await kernel.lifecycle.handler.handle(syscall, identity, log_fields=fields)
    # The result is already a validated model: serialise it once, here, rather
    # than have FastAPI validate it again against the response model.
    return Response(
        result.model_dump_json(),
        status_code=202 if result.outcome == "confirmation_required" else 200,
        media_type="application/json",
    )

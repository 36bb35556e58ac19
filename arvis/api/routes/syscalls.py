"""``POST /v1/syscalls``: the only HTTP route to a tool body."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request, Response

from arvis.api.identity import AgentIdentity, KernelDep, log_fields
from arvis.api.metrics import ApiMetrics
from arvis.api.problems import problem_responses
from arvis.bootstrap import Kernel
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.lifecycle.results import Syscall, SyscallResult

router = APIRouter(tags=["syscalls"])


class RunNotServed(ArvisError):
    """This instance serves one turn's run (``arvis serve-turn RUN``) and the syscall
    names another; nothing was recorded. Send it to that run's instance."""

    code = "run_not_served"


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
    return await execute(syscall, identity, kernel, request.app.state.metrics, log_fields(request))


async def execute(
    syscall: Syscall,
    identity: Identity,
    kernel: Kernel,
    metrics: ApiMetrics,
    fields: dict[str, str],
) -> Response:
    """The route's work, shared with its fast lane (arvis.api.fastlane)."""
    fields["run_id"] = syscall.run_id
    fields["causal_id"] = syscall.causal_id
    served = kernel.settings.turn_run_id
    if served is not None and syscall.run_id != served:
        metrics.syscall_errors.labels(RunNotServed.code).inc()
        raise RunNotServed(f"this instance serves the turn of run {served!r} only")
    started = time.perf_counter()
    try:
        result = await kernel.lifecycle.handler.handle(syscall, identity)
    except ArvisError as exc:
        metrics.syscall_errors.labels(exc.code).inc()
        raise
    metrics.observe_syscall(result, time.perf_counter() - started)
    fields["outcome"] = result.outcome
    # The result is already a validated model: serialise it once, here, rather
    # than have FastAPI validate it again against the response model.
    return Response(
        result.model_dump_json(),
        status_code=202 if result.outcome == "confirmation_required" else 200,
        media_type="application/json",
    )

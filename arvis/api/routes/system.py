"""Tools of the current plan, health, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from arvis.api.schemas import ToolOut, ToolsOut
from arvis.domain.errors import StoreUnavailable
from arvis.kernel import Kernel
from arvis.lifecycle.policy.shadow import ShadowPolicy
from arvis.tools.describe import describe_tool
from arvis.web.identity import AdminIdentity, AnyIdentity, KernelDep
from arvis.web.metrics import ApiMetrics
from arvis.web.problems import problem, problem_responses

router = APIRouter()


@router.get(
    "/v1/tools",
    response_model=ToolsOut,
    tags=["tools"],
    responses=problem_responses(401, 503),
)
async def list_tools(_: AnyIdentity, kernel: KernelDep) -> ToolsOut:
    """Definitions of the current tool plan (any role)."""
    plan = kernel.lifecycle.plans.current
    return ToolsOut(
        plan_id=plan.plan_id,
        tools=[ToolOut(**describe_tool(d)) for d in plan.definitions.values()],
    )


@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses=problem_responses(503))
async def readyz(kernel: KernelDep) -> dict[str, str]:
    """Readiness: the database answers."""
    await kernel.stats.ping()
    return {"status": "ready"}


@router.get(
    "/metrics",
    tags=["health"],
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **problem_responses(401, 403),
    },
)
async def metrics(_: AdminIdentity, kernel: KernelDep, request: Request) -> Response:
    """Prometheus text format (admin role; with ``ARVIS_METRICS_PORT``, also with no key
    on that loopback port)."""
    return await scrape(kernel, request.app.state.metrics)


async def scrape(kernel: Kernel, collected: ApiMetrics) -> Response:
    """The metrics in Prometheus text format, the gauges read now."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    policy = kernel.lifecycle.policy
    if isinstance(policy, ShadowPolicy):
        collected.shadow_disagreements.counts = policy.disagreements
    collected.witness_backlog.feed = kernel.lifecycle.witness_feed
    try:
        collected.audit_incomplete_runs.set(await kernel.stats.audit_incomplete_runs())
        collected.evidence_broken_runs.set(await kernel.stats.evidence_broken_runs())
    except StoreUnavailable:
        return problem("store_unavailable", "the database is unreachable")
    return Response(generate_latest(collected.registry), media_type=CONTENT_TYPE_LATEST)

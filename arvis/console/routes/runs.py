"""Runs, one run's journal as a timeline with its chain check, and resolving from it."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from arvis.console.deps import Form, User, need
from arvis.console.views import boundary_legend, pretty, timeline
from arvis.console.web import ConsoleRoute, render
from arvis.domain.ids import ID_PATTERN, RunId
from arvis.lifecycle.consent.resolution import RESOLVED_AS
from arvis.lifecycle.runs import RUN_STATUSES
from arvis.web.bodies import ResolveBody
from arvis.web.identity import KernelDep
from arvis.web.runs import RunFilters

router = APIRouter(route_class=ConsoleRoute)

RUNS_PAGE = 50
TIMELINE_PAGE = 500
RunIdPath = Annotated[str, Path(pattern=ID_PATTERN)]


@router.get("/console/runs")
async def runs_page(
    request: Request, kernel: KernelDep, user: User, filters: RunFilters
) -> Response:
    need(user, "auditor")
    found = await kernel.lifecycle.replay.runs(
        user.identity.tenant_id, replace(filters, limit=RUNS_PAGE)
    )
    # The filters stay on the pager's links; only the cursor changes.
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor" and v]
    return render(
        request,
        "runs.html",
        {
            "user": user,
            "runs": found.runs,
            "f": request.query_params,
            "filtered": bool(kept),
            "statuses": RUN_STATUSES,
            "first_url": "/console/runs?" + urlencode(kept),
            "next_url": None
            if found.next_cursor is None
            else "/console/runs?" + urlencode([*kept, ("cursor", found.next_cursor)]),
            "paged": filters.after is not None,
        },
    )


async def _run_context(kernel: KernelDep, user: User, run_id: str, after: int) -> dict[str, object]:
    tenant = user.identity.tenant_id
    # The same verification as GET /v1/runs/{id}/verify; another tenant's run is 404.
    report = await kernel.lifecycle.evidence.verify(tenant, RunId(run_id))
    entries = await kernel.lifecycle.replay.journal(tenant, RunId(run_id), after, TIMELINE_PAGE)
    details = await kernel.lifecycle.replay.run_details(
        tenant, RunId(run_id), [e.causal_id for e in entries]
    )
    rows = timeline(entries, details.arguments)
    return {
        "user": user,
        "run_id": run_id,
        "report": report,
        "rows": rows,
        "pending": [
            (c, pretty(details.arguments.get(c.causal_id, c.payload))) for c in details.pending
        ],
        "open_uncertain": [r for r in rows if r.uncertain and r.resolved_by is None],
        "legend": boundary_legend(),
        "after": after,
        "next_after": entries[-1].position if len(entries) == TIMELINE_PAGE else None,
        "can_resolve": user.can("approver"),
        "resolve_choices": list(RESOLVED_AS),
    }


@router.get("/console/runs/{run_id}")
async def run_page(
    request: Request,
    kernel: KernelDep,
    user: User,
    run_id: RunIdPath,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    fragment: Annotated[bool, Query()] = False,
) -> Response:
    need(user, "auditor")
    context = await _run_context(kernel, user, run_id, after)
    return render(request, "run_body.html" if fragment else "run.html", context)


@router.post("/console/runs/{run_id}/attempts/{idempotency_key}/{attempt}/resolve")
async def resolve(
    kernel: KernelDep,
    user: User,
    form: Form,
    run_id: RunIdPath,
    idempotency_key: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")],
    attempt: Annotated[int, Path(ge=1, le=2**31 - 1)],
) -> Response:
    """The resolve route's service, with its rules (four eyes, not uncertain, tenant)."""
    need(user, "approver")
    body = ResolveBody.model_validate(
        {"as": form.get("as", ""), "evidence": form.get("evidence", "")}
    )
    entry = await kernel.lifecycle.resolutions.resolve(
        user.identity, RunId(run_id), idempotency_key, attempt, RESOLVED_AS[body.as_], body.evidence
    )
    return RedirectResponse(f"/console/runs/{run_id}#entry-{entry.position}", 303)

"""The approvals queue, one confirmation, and approving or denying it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from arvis.console.deps import Form, User, need
from arvis.console.views import ConfirmationView, confirmation_view
from arvis.console.web import ConsoleRoute, render
from arvis.domain.ids import ID_PATTERN, ConfirmationId, TenantId
from arvis.domain.states import ConfirmationState
from arvis.kernel import Kernel
from arvis.lifecycle.records import ConfirmationRecord
from arvis.web.bodies import DecisionBody
from arvis.web.identity import KernelDep

router = APIRouter(route_class=ConsoleRoute)

ConfirmationIdPath = Annotated[str, Path(pattern=ID_PATTERN)]
# The service lists by id; the queue is shown by age, so it reads up to this many and
# sorts them (a queue longer than this is not one a person works through on a page).
MAX_READ = 2000
SHOWN = 200
_PAGE = 500


async def _read(
    kernel: Kernel, tenant: TenantId, state: ConfirmationState | None
) -> list[ConfirmationRecord]:
    found: list[ConfirmationRecord] = []
    after: str | None = None
    while len(found) < MAX_READ:
        page = await kernel.lifecycle.consent.list_confirmations(tenant, state, _PAGE, after)
        found.extend(page)
        if len(page) < _PAGE:
            break
        after = page[-1].confirmation_id
    return found


def _views(kernel: Kernel, records: list[ConfirmationRecord]) -> list[ConfirmationView]:
    definitions = dict(kernel.lifecycle.plans.current.definitions)
    return [confirmation_view(record, definitions) for record in records]


@router.get("/console/approvals")
async def approvals_page(
    request: Request,
    kernel: KernelDep,
    user: User,
    tab: Literal["pending", "decided"] = "pending",
    decided: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    fragment: bool = False,
) -> Response:
    need(user, "approver")
    tenant = user.identity.tenant_id
    if tab == "pending":
        records = await _read(kernel, tenant, ConfirmationState.PENDING)
        records.sort(key=lambda r: (r.created_at, r.confirmation_id))
    else:
        records = [
            r for r in await _read(kernel, tenant, None) if r.state is not ConfirmationState.PENDING
        ]
        records.sort(key=lambda r: (r.decided_at or r.expires_at, r.confirmation_id), reverse=True)
    just_decided = None
    if decided is not None:
        just_decided = await kernel.lifecycle.consent.confirmation(tenant, ConfirmationId(decided))
    context = {
        "user": user,
        "tab": tab,
        "items": _views(kernel, records[:SHOWN]),
        "total": len(records),
        "shown": SHOWN,
        "now": datetime.now(UTC),
        "just_decided": just_decided,
    }
    return render(request, "queue.html" if fragment else "approvals.html", context)


@router.get("/console/confirmations/{confirmation_id}")
async def confirmation_page(
    request: Request, kernel: KernelDep, user: User, confirmation_id: ConfirmationIdPath
) -> Response:
    need(user, "approver")
    record = await kernel.lifecycle.consent.confirmation(
        user.identity.tenant_id, ConfirmationId(confirmation_id)
    )
    return render(
        request,
        "confirmation.html",
        {"user": user, "item": _views(kernel, [record])[0], "now": datetime.now(UTC)},
    )


@router.post("/console/confirmations/{confirmation_id}/approve")
async def approve(
    kernel: KernelDep, user: User, _: Form, confirmation_id: ConfirmationIdPath
) -> Response:
    """The approve route's service: four eyes, groups, quorum, expiry, tenant."""
    need(user, "approver")
    await kernel.lifecycle.consent.approve(user.identity, ConfirmationId(confirmation_id))
    return RedirectResponse(f"/console/approvals?decided={confirmation_id}", 303)


@router.post("/console/confirmations/{confirmation_id}/deny")
async def deny(
    kernel: KernelDep, user: User, form: Form, confirmation_id: ConfirmationIdPath
) -> Response:
    """The deny route's service, with the reason the form asked for."""
    need(user, "approver")
    body = DecisionBody.model_validate({"reason": form.get("reason") or None})
    await kernel.lifecycle.consent.deny(user.identity, ConfirmationId(confirmation_id), body.reason)
    return RedirectResponse(f"/console/approvals?decided={confirmation_id}", 303)

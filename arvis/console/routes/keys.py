"""API keys of the admin's tenant: list, create (the token shown once), revoke.

The same store calls as ``arvis keys create|list|revoke``, limited to the tenant of
the admin's own key.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response

from arvis.console.deps import Form, User, need
from arvis.console.sessions import ConsoleUser
from arvis.console.web import ConsoleRoute, render
from arvis.domain.authorization import GROUP_PATTERN
from arvis.domain.errors import ArvisError
from arvis.domain.identity import ROLES
from arvis.kernel import Kernel
from arvis.lifecycle.errors import NotFound
from arvis.web.identity import KernelDep

router = APIRouter(route_class=ConsoleRoute)

_PRINCIPAL = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


class KeyFormInvalid(ArvisError):
    code = "validation_error"


async def _page(
    request: Request, kernel: Kernel, user: ConsoleUser, created: dict[str, object] | None = None
) -> Response:
    keys = await kernel.keys.list(user.identity.tenant_id)
    return render(
        request,
        "keys.html",
        {"user": user, "keys": keys, "roles": ROLES, "created": created},
        status=201 if created else 200,
    )


@router.get("/console/keys")
async def keys_page(request: Request, kernel: KernelDep, user: User) -> Response:
    need(user, "admin")
    return await _page(request, kernel, user)


@router.post("/console/keys")
async def create_key(request: Request, kernel: KernelDep, user: User, form: Form) -> Response:
    need(user, "admin")
    principal = form.get("principal", "").strip()
    if not _PRINCIPAL.fullmatch(principal):
        raise KeyFormInvalid("a principal is 1 to 128 printable characters")
    roles = [role for role in ROLES if form.get(f"role_{role}") == "on"]
    if not roles:
        raise KeyFormInvalid("choose at least one role")
    groups = [g.strip() for g in form.get("groups", "").split(",") if g.strip()]
    if len(groups) > 16 or not all(re.fullmatch(GROUP_PATTERN, g) for g in groups):
        raise KeyFormInvalid("groups are lowercase names (letters, digits, '.', '_', '-')")
    record, issued = await kernel.keys.create(user.identity.tenant_id, principal, roles, groups)
    # The token is on this answer only (no-store); the store keeps its hash.
    return await _page(request, kernel, user, {"record": record, "token": issued.token})


@router.post("/console/keys/{key_id}/revoke")
async def revoke_key(
    kernel: KernelDep,
    user: User,
    _: Form,
    key_id: Annotated[str, Path(pattern=r"^k[0-9a-f]{16}$")],
) -> Response:
    need(user, "admin")
    if not await kernel.keys.revoke(key_id, user.identity.tenant_id):
        raise NotFound(f"no live key {key_id}")
    return RedirectResponse("/console/keys", 303)

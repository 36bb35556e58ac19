"""API keys of the admin's tenant: list, create (the token shown once), revoke.

The same store calls as ``arvis keys create|list|revoke`` and ``/v1/keys``, with the
body ``POST /v1/keys`` validates, limited to the tenant of the admin's own key.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from arvis.console.deps import Form, User, need
from arvis.console.sessions import ConsoleUser
from arvis.console.web import ConsoleRoute, render
from arvis.domain.errors import ArvisError
from arvis.domain.identity import ROLES
from arvis.kernel import Kernel
from arvis.lifecycle.errors import NotFound
from arvis.web.bodies import KeyBody
from arvis.web.identity import KernelDep

router = APIRouter(route_class=ConsoleRoute)


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
    fields = {
        "principal": form.get("principal", "").strip(),
        "roles": [role for role in ROLES if form.get(f"role_{role}") == "on"],
        "groups": [g.strip() for g in form.get("groups", "").split(",") if g.strip()],
    }
    try:
        # The body POST /v1/keys validates, with its rules.
        body = KeyBody.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise KeyFormInvalid(f"{first['loc'][0]}: {first['msg']}") from None
    record, issued = await kernel.keys.create(
        user.identity.tenant_id, body.principal, body.roles, body.groups
    )
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

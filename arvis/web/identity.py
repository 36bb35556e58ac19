"""Who is calling, as FastAPI dependencies.

Every route but health takes one of the ``Annotated`` aliases below; the
bearer API key determines tenant, principal and roles, and the key's tenant
is the only tenant the request can touch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from arvis.bootstrap import Kernel
from arvis.domain.apikeys import parse_token, secret_matches
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity, Role


class Unauthenticated(ArvisError):
    """No usable API key: missing, malformed, unknown, wrong secret or revoked."""

    code = "unauthenticated"


class ForbiddenRole(ArvisError):
    """The key is valid but has none of the roles this route needs."""

    code = "forbidden_role"


_bearer = HTTPBearer(auto_error=False, description="An ARVIS API key: `arvis_<key id>_<secret>`")


async def get_kernel(request: Request) -> Kernel:
    # async: FastAPI runs a plain ``def`` dependency in a worker thread.
    kernel: Kernel = request.app.state.kernel
    return kernel


KernelDep = Annotated[Kernel, Depends(get_kernel)]


async def current_identity(
    request: Request,
    kernel: KernelDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """The identity of the request's API key, or 401 ``unauthenticated``."""
    identity = await authenticate(kernel, credentials.credentials if credentials else None)
    log_fields(request)["key"] = identity.key_id or ""
    return identity


async def authenticate(kernel: Kernel, token: str | None) -> Identity:
    """The identity of a bearer token, or :class:`Unauthenticated`.

    Every failure answers the same way, so a caller cannot tell an unknown key
    from a wrong secret or a revoked key.
    """
    presented = parse_token(token) if token is not None else None
    if presented is None:
        raise Unauthenticated("a valid API key is required: Authorization: Bearer arvis_…")
    record = await kernel.keys.get(presented.key_id)
    # Compare even when the key is unknown or revoked, so timing says nothing.
    stored_hash = record.secret_hash if record is not None else "0" * 64
    matches = secret_matches(presented.secret, stored_hash)
    if record is None or record.revoked or not matches:
        raise Unauthenticated("a valid API key is required: Authorization: Bearer arvis_…")
    return record.identity()


def log_fields(request: Request) -> dict[str, str]:
    """The fields the access log adds to this request's line (see ``arvis.web.logs``)."""
    return scope_log_fields(request.scope)


def scope_log_fields(scope: MutableMapping[str, Any]) -> dict[str, str]:
    state = scope.setdefault("state", {})
    fields: dict[str, str] = state.setdefault("log_fields", {})
    return fields


def require_role(*roles: Role) -> Callable[[Identity], Awaitable[Identity]]:
    """A dependency passing identities that hold one of ``roles`` (admin holds all)."""

    async def dependency(identity: Annotated[Identity, Depends(current_identity)]) -> Identity:
        if not any(identity.has_role(role) for role in roles):
            raise ForbiddenRole(f"this route needs the role {' or '.join(roles)}")
        return identity

    return dependency


AnyIdentity = Annotated[Identity, Depends(current_identity)]
AgentIdentity = Annotated[Identity, Depends(require_role("agent"))]
ApproverIdentity = Annotated[Identity, Depends(require_role("approver"))]
AuditorIdentity = Annotated[Identity, Depends(require_role("auditor"))]
ReplayIdentity = Annotated[Identity, Depends(require_role("agent", "auditor"))]
AdminIdentity = Annotated[Identity, Depends(require_role("admin"))]

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

from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity, Role
from arvis.kernel import Kernel


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
    token = credentials.credentials if credentials else None
    return await authenticate(kernel, token, log_fields(request))


async def authenticate(
    kernel: Kernel, token: str | None, fields: MutableMapping[str, str] | None = None
) -> Identity:
    """The identity of a bearer token, or :class:`Unauthenticated`; its key id goes on
    the request's log line (``fields``). Every HTTP entry (the routes, the syscall fast
    lane, ``/mcp``, the console's sign-in) authenticates here, with the key store's one
    check, so none can accept a key another would refuse.

    Every failure answers the same way, so a caller cannot tell an unknown key
    from a wrong secret or a revoked key.
    """
    identity = await kernel.keys.authenticated(token)
    if identity is None:
        raise Unauthenticated("a valid API key is required: Authorization: Bearer arvis_…")
    if fields is not None:
        fields["key"] = identity.key_id or ""
    return identity


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

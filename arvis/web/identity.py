"""Who is calling, as FastAPI dependencies: the HTTP glue of :mod:`arvis.identity`.

Every route but health takes one of the ``Annotated`` aliases below; the bearer
credential (an API key or a JWT of a trusted issuer) determines tenant, principal and
roles, and that tenant is the only tenant the request can touch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from arvis.domain.identity import Identity, Role
from arvis.identity.errors import ForbiddenRole
from arvis.identity.extraction import SUBJECT_TOKEN_HEADER
from arvis.kernel import Kernel

_bearer = HTTPBearer(
    auto_error=False,
    description="An ARVIS API key (`arvis_<key id>_<secret>`) or a JWT of a trusted issuer",
)


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
    """The identity of the request's bearer credential, or its 401/403 problem."""
    token = credentials.credentials if credentials else None
    subject = request.headers.get(SUBJECT_TOKEN_HEADER)
    return await authenticate(kernel, token, log_fields(request), subject_token=subject)


async def authenticate(
    kernel: Kernel,
    token: str | None,
    fields: MutableMapping[str, str] | None = None,
    *,
    subject_token: str | None = None,
) -> Identity:
    """The identity of a bearer credential (:class:`arvis.identity.extraction.Authenticator`,
    the one extraction), or its :class:`~arvis.identity.errors.IdentityRefusal`; who it
    is goes on the request's log line (``fields``): the key id, or the token's issuer, and
    the actor of a delegated call. Every HTTP entry (the routes, the syscall fast lane,
    ``/mcp``, the console's sign-in) authenticates here.
    """
    identity = await kernel.identities.authenticate(token, subject_token)
    if fields is not None:
        fields["key"] = identity.key_id or ""
        if identity.issuer is not None:
            fields["issuer"] = identity.issuer
        if identity.actor is not None:
            fields["actor"] = identity.actor.principal_id
    return identity


def subject_token_of(scope: MutableMapping[str, Any]) -> str | None:
    """The ``Arvis-Subject-Token`` header of an ASGI request (for the raw ASGI entries)."""
    wanted = SUBJECT_TOKEN_HEADER.lower().encode("latin-1")
    for name, value in scope.get("headers", ()):
        if name == wanted:
            text: str = value.decode("latin-1")
            return text or None
    return None


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

"""Who is signed in, as FastAPI dependencies of the console's routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from arvis.console.sessions import ConsoleUser, check_csrf, current_user
from arvis.console.web import SignInRequired, read_form
from arvis.identity.errors import ForbiddenRole
from arvis.web.identity import KernelDep


async def signed_in(request: Request, kernel: KernelDep) -> ConsoleUser:
    user = await current_user(kernel, request)
    if user is None:
        raise SignInRequired
    request.state.console_user = user
    return user


User = Annotated[ConsoleUser, Depends(signed_in)]


def need(user: ConsoleUser, role: str) -> None:
    """Roles as on the API: approvals need approver, runs auditor; admin holds all."""
    if not user.can(role):
        raise ForbiddenRole(f"this page needs the role {role}")


async def posted(request: Request, user: User) -> dict[str, str]:
    """The form of a state-changing request, refused without this session's CSRF token."""
    form = await read_form(request)
    check_csrf(user, form.get("csrf_token"))
    return form


Form = Annotated[dict[str, str], Depends(posted)]

"""Signing in with an API key or through an OpenID provider, and out again."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from arvis.console import oidc, sessions
from arvis.console.deps import Form, User
from arvis.console.web import ConsoleRoute, read_form, render
from arvis.identity.errors import ForbiddenRole, IdentityRefusal
from arvis.web.identity import KernelDep

router = APIRouter(route_class=ConsoleRoute)

# Where a sign-in may send the browser: a console page of this origin, nothing else.
_NEXT = re.compile(r"^/[A-Za-z0-9._:~/?=&%-]*$")


def _home(user: sessions.ConsoleUser) -> str:
    return "/console/approvals" if user.can("approver") else "/console/runs"


def _safe_next(target: str | None) -> str | None:
    """``target`` with its path normalised, when that path is a console page; else None.

    A browser resolves ``.`` and ``..`` segments (``%2e`` spelled too) before it asks,
    so ``/console/../../x`` would land on ``/x``: the path is normalised the same way
    first, and only a result under ``/console`` is taken.
    """
    if target is None or len(target) > 512 or not _NEXT.fullmatch(target):
        return None
    path, mark, query = target.partition("?")
    if "//" in path:
        return None
    normal = _dot_segments_removed(path)
    if normal != "/console" and not normal.startswith("/console/"):
        return None
    return normal + mark + query


def _dot_segments_removed(path: str) -> str:
    """``path`` as a browser resolves it (RFC 3986 §5.2.4; WHATWG's ``%2e`` dots)."""
    kept: list[str] = []
    for segment in path.split("/")[1:]:
        dots = segment.lower().replace("%2e", ".")
        if dots == "..":
            if kept:
                kept.pop()
        elif dots != ".":
            kept.append(segment)
    return "/" + "/".join(kept)


@router.get("/console")
async def home(request: Request, kernel: KernelDep) -> Response:
    user = await sessions.current_user(kernel, request)
    return RedirectResponse("/console/sign-in" if user is None else _home(user), 303)


def _sign_in_page(
    request: Request, next_page: str | None, *, error: str | None = None, status: int = 200
) -> HTMLResponse:
    token = sessions.sign_in_token(request)
    response = render(
        request,
        "sign_in.html",
        {
            "user": None,
            "signin_token": token,
            "next": next_page or "",
            "error": error,
            "providers": oidc.providers(request.app.state.kernel),
        },
        status=status,
    )
    sessions.set_sign_in_cookie(request, response, token)
    return response


@router.get("/console/sign-in")
async def sign_in_form(
    request: Request,
    kernel: KernelDep,
    next_page: Annotated[str | None, Query(alias="next", max_length=512)] = None,
) -> Response:
    user = await sessions.current_user(kernel, request)
    if user is not None:
        return RedirectResponse(_safe_next(next_page) or _home(user), 303)
    return _sign_in_page(request, _safe_next(next_page))


@router.post("/console/sign-in")
async def sign_in(request: Request, kernel: KernelDep) -> Response:
    form = await read_form(request)
    sessions.check_sign_in_token(request, form.get("signin_token"))
    next_page = _safe_next(form.get("next") or None)
    response = RedirectResponse("/console", 303)
    try:
        await sessions.sign_in(kernel, request, response, form.get("api_key", ""))
    except ForbiddenRole as exc:
        return _sign_in_page(request, next_page, error=exc.message, status=403)
    except IdentityRefusal:
        return _sign_in_page(request, next_page, error="That API key was not accepted.", status=401)
    if next_page is not None:
        response.headers["location"] = next_page
    return response


def _moving_on(request: Request, heading: str, text: str, link: str, target: str) -> Response:
    """A page that moves on to ``target`` by itself (and links to it)."""
    context = {"user": None, "heading": heading, "text": text, "link": link, "target": target}
    return render(request, "moving_on.html", context)


@router.get("/console/oidc/start")
async def oidc_start(
    request: Request,
    kernel: KernelDep,
    issuer: Annotated[int, Query(ge=0, le=1000)],
    next_page: Annotated[str | None, Query(alias="next", max_length=512)] = None,
) -> Response:
    url, flow = await oidc.start(kernel, request, issuer, _safe_next(next_page))
    response = RedirectResponse(url, 303)
    oidc.set_flow_cookie(request, response, flow)
    return response


@router.get(oidc.CALLBACK_PATH)
async def oidc_callback(request: Request, kernel: KernelDep) -> Response:
    params = {name: value[:2048] for name, value in request.query_params.items()}
    identity, next_page = await oidc.finish(kernel, request, params)
    target = _safe_next(next_page) or "/console"
    # A page of ours, not a redirect: the provider's redirect here was a cross-site
    # navigation, on which the browser would not send the SameSite=Strict session cookie.
    response = _moving_on(request, "Signed in", "", "Continue to the console", target)
    await sessions.start_session(kernel, request, response, identity)
    response.delete_cookie(oidc.FLOW_COOKIE, path=oidc.FLOW_PATH)
    return response


@router.post("/console/sign-out")
async def sign_out(request: Request, kernel: KernelDep, user: User, _: Form) -> Response:
    after = str(request.base_url).rstrip("/") + "/console/sign-in"
    elsewhere = await oidc.end_session_url(kernel, user.identity, after)
    # The provider's end-session is reached from a page, not by a redirect: the console's
    # form-action 'self' forbids a form's redirect to another origin.
    response: Response = (
        RedirectResponse("/console/sign-in", 303)
        if elsewhere is None
        else _moving_on(
            request,
            "Signed out",
            "Your console session has ended.",
            "Sign out at the identity provider too",
            elsewhere,
        )
    )
    await sessions.sign_out(kernel, user, response)
    return response

"""What every console page shares: templates, security headers, forms and error pages.

Pages are rendered by Jinja2 with autoescaping on for every template, so anything
that came from a payload, a result or a reason is shown as text. Every answer under
``/console`` carries a Content-Security-Policy that admits this origin's own script
and stylesheet only (no inline script, nothing from elsewhere), refuses framing and
is not cached — errors included, whichever layer answers them (:class:`ConsoleHeaders`:
an unknown page, another method, a body over the server's limit, a deadline). Errors
are pages, with the status and stable code of the API's problem.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import ValidationError
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arvis.console.views import STATE_WORDS, acting
from arvis.domain.errors import ArvisError
from arvis.web.problems import STATUS_BY_CODE, TITLES

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 16 * 1024
"""Largest form a console page posts (a deny reason, evidence, a new key's fields)."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).isoformat(timespec="seconds")


templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["when"] = _when
templates.filters["iso"] = _iso
templates.filters["urlpart"] = lambda value: quote(str(value), safe="")
templates.filters["state_word"] = lambda state: STATE_WORDS.get(str(state), str(state).lower())
templates.filters["acting_for"] = acting


class SignInRequired(Exception):
    """No live session: a page sends the browser to the sign-in form."""


def render(
    request: Request,
    name: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
) -> HTMLResponse:
    page = templates.get_template(name).render(request_path=request.url.path, **context)
    return HTMLResponse(page, status_code=status)


async def read_form(request: Request) -> dict[str, str]:
    """The posted form's fields (the first value of each), bounded in size."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise FormTooLarge(f"console forms are limited to {MAX_FORM_BYTES} bytes")
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if body and content_type != "application/x-www-form-urlencoded":
        raise FormMediaType("console forms are application/x-www-form-urlencoded")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=32)
    except (UnicodeDecodeError, ValueError):
        raise FormMalformed("the form could not be read") from None
    return {name: values[0] for name, values in fields.items()}


class FormTooLarge(ArvisError):
    code = "body_too_large"


class FormMediaType(ArvisError):
    code = "unsupported_media_type"


class FormMalformed(ArvisError):
    code = "malformed_body"


def error_page(request: Request, code: str, detail: str) -> HTMLResponse:
    status = STATUS_BY_CODE.get(code, 500)
    title = TITLES.get(code, "Error")
    return render(
        request,
        "error.html",
        {
            "user": getattr(request.state, "console_user", None),
            "code": code,
            "title": title,
            "detail": detail,
            "status": status,
        },
        status=status,
    )


def _answer_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, SignInRequired):
        if request.method == "GET":
            target = request.url.path
            if request.url.query:
                target += "?" + request.url.query
            return RedirectResponse(f"/console/sign-in?next={quote(target, safe='')}", 303)
        return error_page(request, "unauthenticated", "your session has ended; sign in again")
    if isinstance(exc, RequestValidationError | ValidationError):
        return error_page(request, "validation_error", "the address or the form is not valid")
    if isinstance(exc, ArvisError) and exc.code in STATUS_BY_CODE:
        return error_page(request, exc.code, exc.message)
    log.error("unexpected error on a console page", exc_info=exc)
    return error_page(request, "internal_error", "the page could not be shown")


class ConsoleRoute(APIRoute):
    """A console route: errors answer as pages, every answer has the security headers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def console_handler(request: Request) -> Response:
            try:
                response = await handler(request)
            except Exception as exc:  # the console's HTTP boundary: a page, never a trace
                response = _answer_error(request, exc)
            response.headers.update(SECURITY_HEADERS)
            return response

        return console_handler


def is_console_path(path: str) -> bool:
    return path == "/console" or path.startswith("/console/")


class ConsoleHeaders:
    """ASGI middleware: every answer under ``/console`` gets :data:`SECURITY_HEADERS`.

    The console's routes set them too; this holds for what no console route answers
    (the API's 405, a body guard's 413, a deadline's 503). Installed outermost
    (``arvis.serving.app``), so no layer answers around it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, secured)


# The router's own refusals of an address under /console that no console route took.
_CODE_BY_STATUS = {404: "not_found", 405: "method_not_allowed"}
_DETAILS = {
    "not_found": "the console has no such page",
    "method_not_allowed": "this page does not take that method",
}


def install_error_pages(app: FastAPI) -> None:
    """Answer the router's 404 and 405 under ``/console`` with the console's error page.

    Wraps the HTTP-error handler already installed (the API's problem answers), which
    keeps every other path.
    """
    previous = app.exception_handlers.get(StarletteHTTPException)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = _CODE_BY_STATUS.get(exc.status_code)
        if code is None or not is_console_path(request.url.path):
            if previous is None:
                raise exc
            answer = previous(request, exc)
            return await answer if not isinstance(answer, Response) else answer
        page = error_page(request, code, _DETAILS[code])
        if exc.headers:
            page.headers.update(exc.headers)  # 405 says what is allowed
        page.headers.update(SECURITY_HEADERS)
        return page

    app.add_exception_handler(StarletteHTTPException, on_http_error)

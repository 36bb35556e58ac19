"""The API docs pages (``/docs``, ``/redoc``) with their assets served from the package.

FastAPI's default pages load Swagger UI and ReDoc from a CDN, so on a machine without
internet access (an air-gapped deployment, a laptop on a train) ``/docs`` is a blank
page. The ``fastapi-offline`` package ships both bundles, kept current with their
releases; FastAPI's own page builders (``get_swagger_ui_html``, ``get_redoc_html``)
point at them here, under ``/docs/assets``. Nothing on either page names another host,
and a Content-Security-Policy keeps the browser from loading anything off it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS = "/docs/assets"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"

# The pages load nothing from another host, and the browser is told so: ReDoc's bundle
# renders a "powered by" logo from its vendor's CDN, which this refuses (the page shows
# the link without the image). Both pages configure their bundle in an inline script
# and inline styles; ReDoc's search runs in a worker made from a blob.
POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ]
)


def serve_docs(app: FastAPI, openapi_url: str) -> None:
    """Serve ``/docs`` (Swagger UI) and ``/redoc`` for the schema at ``openapi_url``."""
    assets = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")

    def swagger_ui(url: _Urls) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=url(openapi_url),
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT,
            swagger_js_url=url(f"{ASSETS}/swagger-ui-bundle.js"),
            swagger_css_url=url(f"{ASSETS}/swagger-ui.css"),
            swagger_favicon_url=url(f"{ASSETS}/favicon.png"),
            # No badge that sends the schema to the public validator.
            swagger_ui_parameters={"validatorUrl": None},
        )

    def redoc(url: _Urls) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=url(openapi_url),
            title=f"{app.title} - ReDoc",
            redoc_js_url=url(f"{ASSETS}/redoc.standalone.js"),
            redoc_favicon_url=url(f"{ASSETS}/favicon.png"),
            with_google_fonts=False,
        )

    for path, page in (("/docs", swagger_ui), ("/redoc", redoc)):
        app.add_api_route(path, _same_host_only(page), include_in_schema=False)

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


_Urls = Callable[[str], str]
"""A path of this app as the browser must ask for it (behind a proxy's root path)."""


def _same_host_only(page: Callable[[_Urls], HTMLResponse]) -> Callable[..., Any]:
    """The route answering ``page``, under the policy that loads nothing off this host."""

    async def route(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        answer = page(lambda path: f"{root}{path}")
        answer.headers["Content-Security-Policy"] = POLICY
        return answer

    return route

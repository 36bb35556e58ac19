"""The API docs pages (``/docs``, ``/redoc``) with their assets served from the package.

FastAPI's default pages load Swagger UI and ReDoc from a CDN, so on a machine without
internet access (an air-gapped deployment, a laptop on a train) ``/docs`` is a blank
page. The ``fastapi-offline`` package ships both bundles, kept current with their
releases; FastAPI's own page builders (``get_swagger_ui_html``, ``get_redoc_html``)
point at them here, under ``/docs/assets``. Nothing on either page names another host,
and a Content-Security-Policy keeps the browser from loading anything off it.
"""

from __future__ import annotations

from importlib.resources import files

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

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS}/{name}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return _same_host_only(
            get_swagger_ui_html(
                openapi_url=request.scope.get("root_path", "") + openapi_url,
                title=f"{app.title} - Swagger UI",
                oauth2_redirect_url=OAUTH2_REDIRECT,
                swagger_js_url=asset(request, "swagger-ui-bundle.js"),
                swagger_css_url=asset(request, "swagger-ui.css"),
                swagger_favicon_url=asset(request, "favicon.png"),
                # No badge that sends the schema to the public validator.
                swagger_ui_parameters={"validatorUrl": None},
            )
        )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return _same_host_only(
            get_redoc_html(
                openapi_url=request.scope.get("root_path", "") + openapi_url,
                title=f"{app.title} - ReDoc",
                redoc_js_url=asset(request, "redoc.standalone.js"),
                redoc_favicon_url=asset(request, "favicon.png"),
                with_google_fonts=False,
            )
        )


def _same_host_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page

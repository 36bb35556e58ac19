"""``/docs`` and ``/redoc`` work on a machine with no internet: their pages name no other
host, their assets come from the package, and Chromium, with every request off the
loopback refused, renders both."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from arvis.bootstrap import build_kernel
from arvis.serving.app import create_app
from tests.support.http import app_settings
from tests.support.server import running

pytestmark = pytest.mark.db

CHROMIUM = Path("/usr/bin/chromium")
_REFERENCE = re.compile(r"""(?:src|href|url)\s*[=:(]\s*['"]?([^'"\s)>]+)""")


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = app_settings(database_url, tmp_path_factory.mktemp("arvis-docs"))
    with running(create_app(functools.partial(build_kernel, settings))) as url:
        yield url


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_name_no_other_host_and_their_assets_are_served(
    served: str, page: str
) -> None:
    html = httpx.get(served + page, timeout=30)
    assert html.status_code == 200
    assert "default-src 'self'" in html.headers["content-security-policy"]
    assert "://" not in html.text, html.text
    references = _REFERENCE.findall(html.text)
    assets = [ref for ref in references if ref.startswith("/docs/assets/")]
    assert assets, references
    for ref in references:
        assert ref.startswith("/"), ref
    for ref in assets:
        assert httpx.get(served + ref, timeout=30).status_code == 200, ref


def test_the_openapi_schema_is_one_swagger_ui_can_render(served: str) -> None:
    # Swagger UI before 5 refuses OpenAPI 3.1 ("does not specify a valid version field").
    schema = httpx.get(served + "/openapi.json", timeout=30).json()
    assert schema["openapi"].startswith("3.1")
    bundle = httpx.get(served + "/docs/assets/swagger-ui-bundle.js", timeout=30).text
    versions = {int(v) for v in re.findall(r'version:"(\d+)\.\d+\.\d+"', bundle)}
    assert max(versions) >= 5


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
@pytest.mark.parametrize(("page", "title"), [("/docs", ".info .title"), ("/redoc", "h1")])
async def test_chromium_renders_the_docs_with_every_request_off_the_loopback_refused(
    served: str, page: str, title: str
) -> None:
    from playwright.async_api import Route, async_playwright, expect

    refused: list[str] = []

    async def loopback_only(route: Route) -> None:
        host = urlsplit(route.request.url).hostname
        if host == "127.0.0.1":
            await route.continue_()
        else:
            refused.append(route.request.url)
            await route.abort()

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context: Any = await browser.new_context()
            await context.route("**/*", loopback_only)
            view = await context.new_page()
            await view.goto(served + page)
            await expect(view.locator(title).first).to_contain_text("ARVIS", timeout=30_000)
        finally:
            await browser.close()
    assert refused == []

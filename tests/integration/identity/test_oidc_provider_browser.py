"""The test identity provider's sign-in and sign-out pages in a real browser: Debian's
Chromium driven by Playwright, as the console's browser tests of issue 26 will drive them.

The console's callback is not served here: Playwright answers it itself and the test
reads the code off the URL. Skipped, saying why, without /usr/bin/chromium or Node.js.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.oidc import OidcProvider, unverified_claims

CHROMIUM = Path("/usr/bin/chromium")
CALLBACK = "http://127.0.0.1:18931/console/oidc/callback"
AFTER_LOGOUT = "http://127.0.0.1:18931/console/sign-in"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)

if CHROMIUM.exists():
    from playwright.async_api import Page, Route, async_playwright, expect
else:  # pragma: no cover - the module is skipped
    Page = Route = Any


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context = await browser.new_context()
            opened = await context.new_page()

            async def console(route: Route) -> None:
                await route.fulfill(status=200, content_type="text/html", body="<p>console</p>")

            await opened.route("http://127.0.0.1:18931/**", console)
            yield opened
        finally:
            await browser.close()


async def test_a_person_signs_in_and_out_through_the_providers_pages(
    oidc_provider: OidcProvider, page: Page
) -> None:
    oidc_provider.add_console_redirects([CALLBACK], [AFTER_LOGOUT])
    request = oidc_provider.authorization_request(redirect_uri=CALLBACK)

    await page.goto(request.url)
    await expect(page.get_by_role("heading")).to_contain_text("Sign in to ARVIS console")
    await page.get_by_label("Username").fill("alice")
    await page.get_by_label("Password").fill("wrong")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_have_text("Unknown user or wrong password.")

    await page.get_by_label("Password").fill(oidc_provider.user("alice")["password"])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{CALLBACK}?**")

    tokens = oidc_provider.redeem(request, page.url)
    assert tokens.id_token is not None
    assert unverified_claims(tokens.id_token)["arvis_roles"] == ["approver"]

    await page.goto(oidc_provider.end_session_url(tokens.id_token, AFTER_LOGOUT))
    await page.get_by_role("button", name="Yes, sign me out").click()
    await page.wait_for_url(f"{AFTER_LOGOUT}**")

    # Signed out at the provider: the next authorization asks for a password again.
    await page.goto(oidc_provider.authorization_request(redirect_uri=CALLBACK).url)
    await expect(page.get_by_label("Password")).to_be_visible()

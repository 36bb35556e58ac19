"""A person signs in to the console through the OpenID provider in Chromium and approves
(issue 26, item 3): the console's "Sign in with" button, the provider's login form, back
to the console's callback, the approvals queue, Approve, sign-out at both ends.

Skipped, saying why, only when /usr/bin/chromium is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.identity import trust
from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import OidcProvider

CHROMIUM = Path("/usr/bin/chromium")
SECRET_ENV = "ARVIS_TEST_CONSOLE_OIDC_BROWSER_SECRET"

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get chromium)",
    ),
]

if CHROMIUM.exists():
    from playwright.async_api import async_playwright, expect


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    os.environ[SECRET_ENV] = oidc_provider.client("arvis-console")["client_secret"]
    config = trust(
        oidc_provider.issuer,
        console_client_id="arvis-console",
        console_client_secret_env=SECRET_ENV,
        console_name="the test provider",
    )
    try:
        with serve_arvis(database_url, tmp_path_factory.mktemp("arvis-oidc-browser"), config) as s:
            oidc_provider.add_console_redirects(
                [f"{s.url}/console/oidc/callback"], [f"{s.url}/console/sign-in"]
            )
            yield s
    finally:
        os.environ.pop(SECRET_ENV, None)


async def append(served: Served, causal_id: str) -> dict[str, Any]:
    body = {
        "name": "tool.execute",
        "run_id": "oidc-run",
        "causal_id": causal_id,
        "decision": {"tool": "files.append", "payload": {"path": "n.txt", "line": "via idp"}},
    }
    async with httpx.AsyncClient(base_url=served.url) as client:
        answer = await client.post(
            "/v1/syscalls",
            json=body,
            headers={"Authorization": f"Bearer {served.tokens['acme:agent']}"},
        )
    result: dict[str, Any] = answer.json()
    return result


async def test_a_person_signs_in_through_the_provider_and_approves(
    served: Served, oidc_provider: OidcProvider
) -> None:
    asked = await append(served, "step-1")
    assert asked["outcome"] == "confirmation_required", asked
    cid = asked["confirmation"]["id"]

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = await (await browser.new_context()).new_page()
            await page.goto(f"{served.url}/console")
            await page.get_by_role("link", name="Sign in with the test provider").click()
            await page.get_by_label("Username").fill("alice")
            await page.get_by_label("Password").fill(oidc_provider.user("alice")["password"])
            await page.get_by_role("button", name="Sign in").click()

            await expect(page.get_by_role("heading", name="Approvals", exact=True)).to_be_visible()
            card = page.locator(f"#cnf-{cid}")
            await expect(card).to_contain_text("files.append")
            await card.get_by_role("button", name="Approve").click()
            await expect(page.get_by_role("status")).to_contain_text("is now approved")

            await page.get_by_role("button", name="Sign out").click()
            await page.get_by_role("button", name="Yes, sign me out").click()
            await page.wait_for_url(f"{served.url}/console/sign-in**")
            await expect(page.get_by_label("API key")).to_be_visible()
        finally:
            await browser.close()

    ran = await append(served, "step-1")
    assert ran["outcome"] == "executed", ran

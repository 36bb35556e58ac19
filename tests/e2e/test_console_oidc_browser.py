"""A person signs in to the console through the OpenID provider in Chromium and approves
(issue 26, item 3): the console's "Sign in with" button, the provider's login form, back
to the console's callback, the approvals queue, Approve, sign-out at both ends.

Skipped, saying why, only when /usr/bin/chromium is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.mcp_client import Served
from tests.support.oidc import OidcProvider

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get chromium)",
    ),
]

if CHROMIUM.exists():
    from playwright.async_api import async_playwright, expect


async def append(oidc_console: Served, causal_id: str) -> dict[str, Any]:
    body = {
        "name": "tool.execute",
        "run_id": "oidc-run",
        "causal_id": causal_id,
        "decision": {"tool": "files.append", "payload": {"path": "n.txt", "line": "via idp"}},
    }
    async with httpx.AsyncClient(base_url=oidc_console.url) as client:
        answer = await client.post(
            "/v1/syscalls",
            json=body,
            headers={"Authorization": f"Bearer {oidc_console.tokens['acme:agent']}"},
        )
    result: dict[str, Any] = answer.json()
    return result


async def test_a_person_signs_in_through_the_provider_and_approves(
    oidc_console: Served, oidc_provider: OidcProvider
) -> None:
    asked = await append(oidc_console, "step-1")
    assert asked["outcome"] == "confirmation_required", asked
    cid = asked["confirmation"]["id"]

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = await (await browser.new_context()).new_page()
            await page.goto(f"{oidc_console.url}/console")
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
            await page.wait_for_url(f"{oidc_console.url}/console/sign-in**")
            await expect(page.get_by_label("API key")).to_be_visible()
        finally:
            await browser.close()

    ran = await append(oidc_console, "step-1")
    assert ran["outcome"] == "executed", ran

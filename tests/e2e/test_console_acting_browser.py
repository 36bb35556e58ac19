"""The console says "agent X for person Y" (issues 26, 27), in Chromium against a served
ARVIS that trusts a real OpenID provider: on the runs list (found by the actor's filter),
on every timeline row of the run, and where a consent says who asked (the run's waiting
card, the approvals queue).

Two agents act for alice in one run: the provider's ``arvis-agent`` with a token exchanged
with its actor token runs ``echo``, and ``agent-of-acme``'s API key presenting alice's token
asks consent for ``files.append``. Skipped, saying why, only when /usr/bin/chromium is
missing. With ``ARVIS_CONSOLE_SCREENSHOTS=1`` the pages are saved to docs/console/.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.identity import trust
from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import OidcProvider

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
RUN = "acting-run"

pytestmark = [
    pytest.mark.db,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get chromium)",
    ),
]

if CHROMIUM.exists():
    from playwright.async_api import Page, async_playwright, expect
else:  # pragma: no cover - the module is skipped
    Page = Any


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    config = trust(oidc_provider.issuer) + '\n[policy.default]\nconsent_tools = ["files.append"]\n'
    with serve_arvis(database_url, tmp_path_factory.mktemp("arvis-acting-browser"), config) as s:
        yield s


async def _post(served: Served, headers: dict[str, str], causal: str, tool: str) -> Any:
    payload = {"path": "acting.txt", "line": "for alice"} if tool == "files.append" else {"n": 1}
    body = {
        "name": "tool.execute",
        "run_id": RUN,
        "causal_id": causal,
        "decision": {"tool": tool, "payload": payload},
    }
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        answer = await http.post("/v1/syscalls", json=body, headers=headers)
    assert answer.status_code in (200, 202), answer.text
    return answer.json()


@pytest.fixture(scope="module")
async def confirmation(served: Served, oidc_provider: OidcProvider) -> str:
    """The run: arvis-agent's echo for alice, then agent-of-acme's files.append for her,
    waiting for consent; answers the confirmation's id."""
    alice = oidc_provider.user_token("alice")
    exchanged = oidc_provider.token_exchange(
        alice, audience="arvis", actor_token=oidc_provider.agent_token()
    ).access_token
    ran = await _post(served, {"Authorization": f"Bearer {exchanged}"}, "step-1", "echo")
    assert ran["outcome"] == "executed"
    headers = {**served.auth("acme:agent"), "Arvis-Subject-Token": alice}
    asked = await _post(served, headers, "step-2", "files.append")
    assert asked["outcome"] == "confirmation_required"
    cid: str = asked["confirmation"]["id"]
    return cid


@pytest.fixture
async def page(served: Served) -> AsyncIterator[Page]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            opened = await context.new_page()
            await opened.goto(f"{served.url}/console")
            await opened.get_by_label("API key").fill(served.tokens["acme:admin"])
            await opened.get_by_role("button", name="Sign in").click()
            await expect(opened.get_by_role("button", name="Sign out")).to_be_visible()
            yield opened
        finally:
            await browser.close()


async def shoot(page: Page, name: str) -> None:
    if os.environ.get("ARVIS_CONSOLE_SCREENSHOTS") == "1":
        await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def test_the_runs_list_says_which_agents_acted_for_whom_and_filters_by_one(
    page: Page, served: Served, confirmation: str
) -> None:
    await page.goto(f"{served.url}/console/runs")
    row = page.locator("table.runs tr", has_text=RUN)
    await expect(row.locator("td.who")).to_have_text("agents agent-of-acme, arvis-agent for alice")
    await page.get_by_label("Actor").fill("arvis-agent")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.locator("table.runs tbody tr")).to_have_count(1)
    await expect(page.locator("table.runs tbody tr")).to_contain_text(RUN)
    await page.get_by_label("Actor").fill("alice")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.get_by_text("No runs match.")).to_be_visible()


async def test_every_timeline_row_and_the_consent_say_agent_for_person(
    page: Page, served: Served, confirmation: str, oidc_provider: OidcProvider
) -> None:
    key_id = served.tokens["acme:agent"].split("_")[1]
    await page.goto(f"{served.url}/console/runs/{RUN}")
    waiting = page.locator("section.waiting")
    asked = waiting.locator("dt", has_text="Asked by").locator("xpath=following-sibling::dd[1]")
    await expect(asked).to_have_text("agent agent-of-acme for alice")
    timeline = page.locator("ol.timeline > li")
    await expect(timeline).to_have_count(1)
    await expect(_by(timeline.nth(0))).to_have_text("agent arvis-agent for alice")

    await page.goto(f"{served.url}/console/approvals")
    card = page.locator(f"#cnf-{confirmation}")
    asked = card.locator("dt", has_text="Asked by").locator("xpath=following-sibling::dd[1]")
    await expect(asked).to_have_text("agent agent-of-acme for alice")
    await card.get_by_role("button", name="Approve").click()
    await expect(page.get_by_role("status")).to_contain_text("is now approved")

    ran = await _post(
        served,
        {**served.auth("acme:agent"), "Arvis-Subject-Token": oidc_provider.user_token("alice")},
        "step-2",
        "files.append",
    )
    assert ran["outcome"] == "executed", ran
    await page.goto(f"{served.url}/console/runs/{RUN}")
    await expect(timeline).to_have_count(3)
    admin_key = served.tokens["acme:admin"].split("_")[1]
    await expect(_by(timeline.nth(1))).to_have_text(
        f"admin-of-acme (key {admin_key}), asked by agent agent-of-acme for alice"
    )
    await expect(_by(timeline.nth(2))).to_have_text(f"agent agent-of-acme (key {key_id}) for alice")
    await shoot(page, "run-acting")
    await page.goto(f"{served.url}/console/runs?actor=agent-of-acme")
    await shoot(page, "runs-acting")


def _by(row: Any) -> Any:
    """The "by" of a timeline row: whose call or decision it was."""
    return row.locator("dl.entry-meta dt", has_text="by").locator("xpath=following-sibling::dd[1]")

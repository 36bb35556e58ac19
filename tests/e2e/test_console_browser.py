"""The operator console in a real browser (issue 17): Debian's Chromium driven by
Playwright against a real uvicorn server, as an approver and an auditor would use it.

Skipped, saying why, only when /usr/bin/chromium is missing (``.ci/run`` installs it).
With ``ARVIS_CONSOLE_SCREENSHOTS=1`` the pages are saved to docs/console/ on the way.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.bootstrap import build_kernel
from arvis.serving.app import create_app
from tests.support.http import app_settings, mint_keys
from tests.support.lifecycle import crash_during_dispatch, make_harness
from tests.support.server import running

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)

if CHROMIUM.exists():
    from playwright.async_api import Browser, Page, async_playwright, expect
else:  # pragma: no cover - the module is skipped
    Browser = Page = Any


@dataclass
class Served:
    url: str
    tokens: dict[str, str]
    database_url: str

    async def syscall(
        self,
        tool: str,
        payload: dict[str, Any],
        run_id: str,
        causal_id: str,
        who: str = "acme:agent",
    ) -> dict[str, Any]:
        body = {
            "name": "tool.execute",
            "run_id": run_id,
            "causal_id": causal_id,
            "decision": {"tool": tool, "payload": payload},
        }
        async with httpx.AsyncClient(base_url=self.url) as client:
            answer = await client.post(
                "/v1/syscalls", json=body, headers={"Authorization": f"Bearer {self.tokens[who]}"}
            )
        result: dict[str, Any] = answer.json()
        return result

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        from arvis.store.engine import libpq_url

        with psycopg.connect(libpq_url(self.database_url), autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture(scope="module")
def server_app(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = app_settings(database_url, tmp_path_factory.mktemp("arvis-browser"))
    app = create_app(functools.partial(build_kernel, settings))
    with running(app) as url:
        yield url


@pytest.fixture(scope="module")
async def served(server_app: str, database_url: str) -> Served:
    return Served(server_app, await mint_keys(database_url), database_url)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: dialogs.append(dialog.message))
    try:
        yield opened
    finally:
        await context.close()
    assert dialogs == [], f"a page ran script from a payload: {dialogs}"


async def shoot(page: Page, name: str, *, full_page: bool = True) -> None:
    if os.environ.get("ARVIS_CONSOLE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


async def sign_in(page: Page, served: Served, who: str) -> None:
    await page.goto(f"{served.url}/console")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("API key").fill(served.tokens[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def test_an_approver_approves_the_pending_append_and_the_re_post_runs(
    page: Page, served: Served
) -> None:
    payload = {"path": "notes.txt", "line": "hello from the browser"}
    asked = await served.syscall("files.append", payload, "demo-run", "step-2")
    assert asked["outcome"] == "confirmation_required"
    cid = asked["confirmation"]["id"]

    await page.goto(f"{served.url}/console")
    await shoot(page, "sign-in", full_page=False)
    await sign_in(page, served, "acme:approver")
    await expect(page.get_by_role("heading", name="Approvals", exact=True)).to_be_visible()
    card = page.locator(f"#cnf-{cid}")
    await expect(card).to_contain_text("files.append")
    await expect(card.locator("pre.args")).to_contain_text('"line": "hello from the browser"')
    await expect(card).to_contain_text("agent-of-acme")
    await expect(card).to_contain_text("0 of 1 approval")

    # The queue refreshes itself: a call asked while the page is open shows up.
    later = await served.syscall(
        "files.append", {"path": "later.txt", "line": "asked later"}, "demo-run", "step-9"
    )
    await expect(page.locator(f"#cnf-{later['confirmation']['id']}")).to_be_visible(timeout=10_000)
    await shoot(page, "approvals")

    await card.get_by_role("button", name="Approve").click()
    await expect(page.get_by_role("status")).to_contain_text("is now approved")
    await expect(page.locator(f"#cnf-{cid}")).to_have_count(0)

    ran = await served.syscall("files.append", payload, "demo-run", "step-2")
    assert ran["outcome"] == "executed"

    await page.goto(f"{served.url}/console/confirmations/{cid}")
    decided = page.locator("dt", has_text="Decided by").locator("xpath=following-sibling::dd[1]")
    await expect(decided).to_contain_text("approver-of-acme")
    await shoot(page, "confirmation")
    await page.goto(f"{served.url}/console/approvals")
    await page.get_by_role("link", name="Decided and expired").click()
    await expect(page.locator(f"#cnf-{cid}")).to_contain_text("used")

    # The walk-through's run, as an approver who is also an auditor (admin) sees it.
    await page.get_by_role("button", name="Sign out").click()
    await sign_in(page, served, "acme:admin")
    await page.goto(f"{served.url}/console/runs/demo-run")
    await expect(page.get_by_text("Chain verified (2 entries)")).to_be_visible()
    await expect(page.locator("ol.timeline")).to_contain_text("consent approved")
    await shoot(page, "run-walkthrough")


async def test_an_auditor_sees_the_timeline_verified_then_broken(
    page: Page, served: Served
) -> None:
    await served.syscall("echo", {"hello": "world"}, "audit-run", "step-1")
    await served.syscall("echo", {"say": "<script>alert('owned')</script>"}, "audit-run", "step-2")
    await sign_in(page, served, "acme:auditor")
    await expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    await page.get_by_role("link", name="audit-run").click()
    await expect(page.get_by_text("Chain verified (2 entries)")).to_be_visible()
    timeline = page.locator("ol.timeline > li")
    await expect(timeline).to_have_count(2)
    await expect(timeline.nth(0)).to_contain_text("EFFECT_COMPLETED")
    await timeline.nth(1).locator("summary", has_text="Result").click()
    await expect(timeline.nth(1).locator("pre").first).to_contain_text(
        "<script>alert('owned')</script>"
    )
    assert await page.locator("main script").count() == 0
    await page.get_by_text("Legend: effect boundaries").click()
    await shoot(page, "run")

    # The run page refreshes itself: an entry posted while it is open appears.
    await page.get_by_text("Legend: effect boundaries").click()
    await timeline.nth(1).locator("summary", has_text="Result").click()
    # Refreshing pauses while the reader is in the timeline (focus, an open <details>).
    await page.locator("h1").click()
    await served.syscall("echo", {"third": True}, "audit-run", "step-3")
    await expect(timeline).to_have_count(3, timeout=10_000)
    await expect(page.get_by_text("Chain verified (3 entries)")).to_be_visible()

    served.sql(
        "UPDATE journal_entries SET body = replace(body, 'world', 'WORLD')"
        " WHERE tenant_id = 'acme' AND run_id = 'audit-run' AND position = 1"
    )
    await page.reload()
    await expect(page.get_by_text("Chain broken at position 1")).to_be_visible()

    await page.goto(f"{served.url}/console/runs")
    await shoot(page, "runs")


async def test_another_tenants_approver_sees_nothing_of_the_first(
    page: Page, served: Served
) -> None:
    asked = await served.syscall(
        "files.append", {"path": "secret.txt", "line": "acme only"}, "private-run", "step-1"
    )
    cid = asked["confirmation"]["id"]
    await sign_in(page, served, "globex:approver")
    await expect(page.locator("main")).not_to_contain_text("acme only")
    await expect(page.locator(f"#cnf-{cid}")).to_have_count(0)
    answer = await page.goto(f"{served.url}/console/confirmations/{cid}")
    assert answer is not None
    assert answer.status == 404


async def test_a_form_without_its_csrf_token_is_refused(page: Page, served: Served) -> None:
    asked = await served.syscall(
        "files.append", {"path": "csrf.txt", "line": "forged?"}, "csrf-run", "step-1"
    )
    cid = asked["confirmation"]["id"]
    await sign_in(page, served, "acme:approver")
    card = page.locator(f"#cnf-{cid}")
    await card.locator("form:has(button.approve) input[name=csrf_token]").evaluate(
        "input => input.remove()"
    )
    await card.get_by_role("button", name="Approve").click()
    await expect(page.get_by_role("alert")).to_contain_text("not sent from this session")
    assert served.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", cid) == [
        ("PENDING",)
    ]


async def test_signing_out_makes_the_old_cookie_useless(
    browser: Browser, page: Page, served: Served
) -> None:
    await sign_in(page, served, "acme:auditor")
    cookies = await page.context.cookies()
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    stolen = await browser.new_context()
    try:
        await stolen.add_cookies(cookies)  # type: ignore[arg-type]
        other = await stolen.new_page()
        await other.goto(f"{served.url}/console/runs")
        await expect(other.get_by_role("heading", name="Sign in")).to_be_visible()
    finally:
        await stolen.close()


async def test_an_admin_resolves_an_uncertain_outcome_from_the_run_page(
    page: Page, served: Served
) -> None:
    harness = await make_harness(served.database_url, instance_id="crashed-browser")
    try:
        await crash_during_dispatch(harness, "write", {"text": "t"}, causal_id="c-u")
        await harness.lifecycle.sweeper.sweep()
        run_id = harness.run_id
    finally:
        await harness.close()
    await sign_in(page, served, "acme:admin")
    await page.goto(f"{served.url}/console/runs/{run_id}")
    callout = page.locator("section.uncertain")
    await expect(callout).to_contain_text("EFFECT_STATE_UNKNOWN")
    await callout.get_by_label("Not started").check()
    await callout.get_by_label("Evidence").fill("the downstream log has no such request")
    await callout.get_by_role("button", name="Resolve").click()
    await expect(page.locator("section.uncertain")).to_have_count(0)
    await expect(page.locator("ol.timeline")).to_contain_text(
        "resolved as EFFECT_NOT_STARTED by admin-of-acme: the downstream log has no such request"
    )

    await page.goto(f"{served.url}/console/keys")
    await page.get_by_label("Principal").fill("new-auditor")
    await page.get_by_role("checkbox", name="auditor", exact=True).check()
    await page.get_by_role("button", name="Create key").click()
    token = await page.get_by_label("Token").input_value()
    assert token.startswith("arvis_k")
    key_id = token.split("_")[1]
    mine = page.locator("tr.mine")
    await expect(mine).to_contain_text("your key")
    row = page.locator("tr", has_text=key_id)
    await expect(row).to_contain_text("active")
    await expect(row).to_contain_text("never")
    await shoot(page, "keys")
    # Revoking asks first: the button that revokes is behind a second click.
    revoke = row.get_by_role("button", name=f"Revoke {key_id} (new-auditor)")
    await expect(revoke).to_be_hidden()
    await row.get_by_text("Revoke…").click()
    await expect(row).to_contain_text("This cannot be undone.")
    await revoke.click()
    await expect(page.locator("tr", has_text=key_id)).to_contain_text("revoked")


async def test_a_run_waiting_for_consent_says_so_and_links_to_its_approval(
    page: Page, served: Served
) -> None:
    payload = {"path": "wait.txt", "line": "needs a yes"}
    asked = await served.syscall("files.append", payload, "waiting-run", "step-1")
    cid = asked["confirmation"]["id"]
    await served.syscall("echo", {"before": "the wait"}, "waiting-run", "step-0")
    await sign_in(page, served, "acme:admin")
    await page.goto(f"{served.url}/console/runs?status=waiting_for_consent")
    listed = page.locator("table.runs tr", has_text="waiting-run")
    await expect(listed).to_contain_text("waiting for consent")
    await expect(listed).to_contain_text("files.append")
    await listed.get_by_role("link", name="waiting-run").click()
    waiting = page.locator("section.waiting")
    await expect(waiting).to_contain_text("files.append")
    entry = page.locator("ol.timeline > li").first
    await expect(entry).to_contain_text("agent-of-acme (key k")
    await entry.locator("summary", has_text="Arguments").click()
    await expect(entry.locator("pre.args")).to_contain_text('"before": "the wait"')
    await shoot(page, "run-waiting")
    await waiting.get_by_role("link", name=cid).click()
    card = page.locator(f"#cnf-{cid}")
    await expect(card).to_contain_text("needs a yes")
    await card.get_by_role("link", name="waiting-run").click()
    await expect(page.locator("section.waiting")).to_be_visible()


async def test_an_approver_only_key_is_shown_no_runs(page: Page, served: Served) -> None:
    await sign_in(page, served, "acme:approver")
    nav = page.get_by_role("navigation", name="Console")
    await expect(nav.get_by_role("link", name="Approvals")).to_be_visible()
    await expect(nav.get_by_role("link", name="Runs")).to_have_count(0)
    await expect(nav.get_by_role("link", name="Keys")).to_have_count(0)


async def test_the_queue_reads_at_a_phone_width(browser: Browser, served: Served) -> None:
    await served.syscall(
        "files.append", {"path": "phone.txt", "line": "small screen"}, "phone-run", "step-1"
    )
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = await context.new_page()
        await sign_in(page, served, "acme:approver")
        await expect(page.locator("main")).to_contain_text("small screen")
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        await shoot(page, "approvals-phone", full_page=False)
    finally:
        await context.close()

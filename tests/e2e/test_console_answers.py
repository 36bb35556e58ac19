"""Issue 27, the console: what is waiting and why, the arguments on record (with the
``[journal] redact`` rule), the caller, durations and deciding policies on the timeline,
navigation by role, and the keys page's state, last use and confirmation."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.cedar import write_policies
from tests.support.console import browser_on, sign_in, text_of
from tests.support.http import Api, serve_api

SECRET = "4111-1111-1111-1111"
CONFIG = """
[journal]
redact = ["line", "card.number"]
"""


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    data = tmp_path_factory.mktemp("arvis-console-answers")
    async with serve_api(database_url, data, config=CONFIG) as served:
        yield served


@pytest.fixture
async def browser(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with browser_on(api.app) as client:
        yield client


def _everything_stored(api: Api) -> str:
    """Every row of every table of the schema, as text."""
    tables = api.sql(
        "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name)"
        " FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE'"
    )
    assert len(tables) > 5
    return "\n".join(str(api.sql(f"SELECT t::text FROM {name} t")) for (name,) in tables)


async def test_a_waiting_call_is_on_its_run_page_linked_to_its_approval(
    api: Api, browser: httpx.AsyncClient
) -> None:
    asked = await api.syscall(
        "files.append", {"path": "w.txt", "line": "wait"}, run_id="run-waits", causal_id="c-1"
    )
    cid = asked.json()["confirmation"]["id"]
    await sign_in(browser, api.tokens["acme:admin"])
    page = (await browser.get("/console/runs/run-waits")).text
    assert f'href="/console/confirmations/{cid}"' in page
    words = text_of(page)
    assert "Waiting for consent" in words
    assert "files.append waiting" in words
    assert "Asked by agent-of-acme" in words
    assert "the calls above wait for consent" in words
    card = (await browser.get(f"/console/confirmations/{cid}")).text
    assert 'href="/console/runs/run-waits"' in card
    # Which rule demanded the consent, and why, as the policy said when it asked.
    asked_by = (
        text_of(card).split("Expires", 1)[1].split(" Policy ", 1)[1].split(" Approvals", 1)[0]
    )
    assert asked_by.startswith("default.consent_for_mutating_unsafe (rules default)"), asked_by
    assert asked_by.endswith("tool 'files.append' is mutating and replay-unsafe"), asked_by
    # The API answers the same, and so the approvers of every other path see it.
    listed = await api.client.get("/v1/confirmations", headers=api.auth("acme:approver"))
    [policy] = [c["policy"] for c in listed.json()["confirmations"] if c["id"] == cid]
    assert policy["engine"] == "rules"
    assert policy["policy_ids"] == ["default.consent_for_mutating_unsafe"]
    assert policy["reason"] == "tool 'files.append' is mutating and replay-unsafe"
    listed = text_of((await browser.get("/console/runs?status=waiting_for_consent")).text)
    assert "waiting for consent run-waits agent-of-acme files.append" in listed


async def test_an_entry_shows_its_arguments_caller_duration_and_policy(
    api: Api, browser: httpx.AsyncClient
) -> None:
    ran = await api.syscall("echo", {"greeting": "hello there"}, run_id="run-args", causal_id="c")
    assert ran.json()["outcome"] == "executed"
    refused = await api.syscall("files.read", {"path": "../x"}, run_id="run-args", causal_id="r")
    assert refused.json()["outcome"] == "refused"
    await sign_in(browser, api.tokens["acme:auditor"])
    page = text_of((await browser.get("/console/runs/run-args")).text)
    assert '"greeting": "hello there"' in page
    assert "These are the arguments the entry's payload digest names." in page
    # The decisions row is not part of the chain: a changed one is called out.
    api.sql(
        'UPDATE decisions SET payload = \'{"greeting": "forged"}\'::jsonb'
        " WHERE run_id = 'run-args' AND causal_id = 'c'"
    )
    forged = text_of((await browser.get("/console/runs/run-args")).text)
    assert "These arguments are not the ones the entry's digest names" in forged
    key_id = api.tokens["acme:agent"].split("_")[1]
    assert f"by agent-of-acme (key {key_id})" in page
    assert " ms " in page or " s " in page
    assert "policy " in page
    # The capability, receipt and fingerprint stay folded in the whole entry.
    assert "Entry, hashes and internal fields" in page
    assert page.index("Arguments") < page.index("store_fingerprint")


async def test_redacted_fields_are_stored_as_their_digest_and_the_run_still_verifies(
    api: Api, browser: httpx.AsyncClient
) -> None:
    payload = {"path": "pay.txt", "line": SECRET}
    asked = await api.syscall("files.append", payload, run_id="run-card", causal_id="c-1")
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    cid = asked.json()["confirmation"]["id"]
    listed = await api.client.get("/v1/confirmations", headers=api.auth("acme:approver"))
    assert SECRET not in listed.text
    approved = await api.client.post(
        f"/v1/confirmations/{cid}/approve", headers=api.auth("acme:approver")
    )
    assert approved.status_code == 200, approved.text
    ran = await api.syscall("files.append", payload, run_id="run-card", causal_id="c-1")
    assert ran.json()["outcome"] == "executed", ran.text
    rejected = await api.syscall(
        "files.append", {"path": 1, "line": SECRET}, run_id="run-card", causal_id="bad"
    )
    assert rejected.json()["outcome"] == "refused"

    verified = await api.client.get("/v1/runs/run-card/verify", headers=api.auth("acme:auditor"))
    assert verified.json()["ok"] is True, verified.text
    assert SECRET not in _everything_stored(api)
    # The tool had the clear value: the effect is the one asked for.
    sandbox = api.app.state.kernel.settings.data_dir / "sandbox"
    assert SECRET in (sandbox / "pay.txt").read_text()
    again = await api.syscall("files.append", payload, run_id="run-card", causal_id="c-1")
    assert again.json()["outcome"] == "deduplicated"

    await sign_in(browser, api.tokens["acme:auditor"])
    page = text_of((await browser.get("/console/runs/run-card")).text)
    assert '"$redacted": "sha256:' in page
    assert '"path": "pay.txt"' in page
    assert "are shown as their SHA-256" in page
    assert SECRET not in page


async def test_the_navigation_shows_only_what_the_roles_allow(
    api: Api, browser: httpx.AsyncClient
) -> None:
    await sign_in(browser, api.tokens["acme:approver"])
    page = (await browser.get("/console/approvals")).text
    assert 'href="/console/approvals"' in page
    assert 'href="/console/runs"' not in page
    assert 'href="/console/keys"' not in page
    await browser.post("/console/sign-out", data={"csrf_token": ""})
    async with browser_on(api.app) as auditor:
        await sign_in(auditor, api.tokens["acme:auditor"])
        page = (await auditor.get("/console/runs")).text
        assert 'href="/console/runs"' in page
        assert 'href="/console/approvals"' not in page


async def test_a_consent_used_up_says_used(api: Api, browser: httpx.AsyncClient) -> None:
    asked = await api.syscall(
        "files.append", {"path": "u.txt", "line": "u"}, run_id="run-used", causal_id="c-1"
    )
    cid = asked.json()["confirmation"]["id"]
    await api.client.post(f"/console/../v1/confirmations/{cid}/approve")  # no key: refused
    approved = await api.client.post(
        f"/v1/confirmations/{cid}/approve", headers=api.auth("acme:approver")
    )
    assert approved.status_code == 200
    await api.syscall(
        "files.append", {"path": "u.txt", "line": "u"}, run_id="run-used", causal_id="c-1"
    )
    await sign_in(browser, api.tokens["acme:approver"])
    card = text_of((await browser.get(f"/console/confirmations/{cid}")).text)
    assert "files.append used" in card
    assert "CONSUMED" not in card


async def test_the_keys_page_says_active_or_revoked_marks_mine_and_asks_before_revoking(
    api: Api, browser: httpx.AsyncClient
) -> None:
    made = await api.client.post(
        "/v1/keys",
        json={"principal": "to-revoke", "roles": ["agent"]},
        headers=api.auth("acme:admin"),
    )
    other = made.json()["key_id"]
    await api.client.get("/v1/tools", headers={"Authorization": f"Bearer {made.json()['token']}"})
    await api.app.state.kernel.keys.settle_touches()
    csrf = await sign_in(browser, api.tokens["acme:admin"])
    mine = api.tokens["acme:admin"].split("_")[1]
    page = (await browser.get("/console/keys")).text
    words = text_of(page)
    assert f"{mine} your key" in words
    assert "Last used" in words
    assert f"{other} to-revoke agent" in words
    assert "never" in words or "UTC" in words
    assert "Revoke…" in words
    assert "This cannot be undone." in words
    revoked = await browser.post(f"/console/keys/{other}/revoke", data={"csrf_token": csrf})
    assert revoked.status_code == 303
    words = text_of((await browser.get("/console/keys")).text)
    row = words[words.index(other) :]
    assert row.split(" active ")[0].count("revoked") >= 1


CEDAR = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"
"""
POLICIES = {
    "main.cedar": (
        '@id("everyone-may-echo")\n'
        'permit (principal, action, resource == Arvis::Tool::"echo");\n'
        '@id("no-file-writes")\n'
        'forbid (principal, action, resource == Arvis::Tool::"files.write");\n'
    )
}


async def test_the_deciding_policy_ids_are_on_the_timeline(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = write_policies(tmp_path_factory.mktemp("arvis-console-cedar"), POLICIES)
    async with serve_api(database_url, data, config=CEDAR) as api, browser_on(api.app) as browser:
        ran = await api.syscall("echo", {"n": 1}, run_id="run-cedar", causal_id="c-1")
        assert ran.json()["outcome"] == "executed", ran.text
        refused = await api.syscall(
            "files.write", {"path": "x.txt", "content": "x"}, run_id="run-cedar", causal_id="c-2"
        )
        assert refused.json()["outcome"] == "refused", refused.text
        await sign_in(browser, api.tokens["acme:auditor"])
        page = text_of((await browser.get("/console/runs/run-cedar")).text)
        assert "everyone-may-echo (cedar" in page
        assert "no-file-writes (cedar" in page

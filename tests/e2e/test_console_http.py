"""The operator console over HTTP (issue 17): sessions, CSRF, roles and tenants, escaping,
and decisions made through the same services as the API."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest

from arvis.domain.apikeys import parse_token
from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.console import browser_on, hidden, sign_in, text_of
from tests.support.http import Api, serve_api
from tests.support.lifecycle import Harness, crash_during_dispatch, make_harness
from tests.support.unsuretools import RUNS

# A quorum-2 tool that loses track of its first call: resolving it (issue 23).
CONFIG = """
[tools]
factories = ["tests.support.unsuretools:make_tools"]

[policy.default.approvals."probe.unsure"]
approvers = ["payments-leads"]
quorum = 2
"""


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    data = tmp_path_factory.mktemp("arvis-console")
    async with serve_api(database_url, data, config=CONFIG) as served:
        store = await PgStore.open(database_url)
        try:
            for name in ("lead-a", "lead-b"):
                _, issued = await PgKeyStore(store.engine, store.ops).create(
                    "acme", name, ["approver"], ["payments-leads"]
                )
                served.tokens[f"acme:{name}"] = issued.token
        finally:
            await store.close()
        yield served


@pytest.fixture
async def browser(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client of its own cookie jar on the same app: one browser."""
    async with browser_on(api.app) as client:
        yield client


async def _pending(api: Api, run_id: str, line: str) -> str:
    asked = await api.syscall(
        "files.append", {"path": f"{run_id}.txt", "line": line}, run_id=run_id, causal_id="c-1"
    )
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    return str(asked.json()["confirmation"]["id"])


async def test_signing_in_exchanges_the_key_for_a_hashed_strict_http_only_session(
    api: Api, browser: httpx.AsyncClient
) -> None:
    await sign_in(browser, api.tokens["acme:approver"])
    cookie = next(c for c in browser.cookies.jar if c.name == "arvis_console")
    assert cookie.path == "/console"
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert not cookie.secure  # plain HTTP here; Secure when the request came over HTTPS
    assert cookie.expires is not None
    stored = api.sql("SELECT token_hash, key_id FROM console_sessions")
    digest = hashlib.sha256(str(cookie.value).encode()).hexdigest()
    assert digest in {row[0] for row in stored}
    rows = api.sql("SELECT * FROM console_sessions")
    token = api.tokens["acme:approver"]
    assert not any(str(cookie.value) in str(row) or token in str(row) for row in rows)
    presented = parse_token(token)  # the whole secret (it may itself hold an ``_``)
    assert presented is not None
    assert not any(presented.secret in str(row) for row in rows)


async def test_the_session_cookie_is_same_site_strict(api: Api) -> None:
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
        form = await client.get("/console/sign-in")
        answer = await client.post(
            "/console/sign-in",
            data={
                "api_key": api.tokens["acme:auditor"],
                "signin_token": hidden(form.text, "signin_token"),
            },
        )
    set_cookie = [v for k, v in answer.headers.multi_items() if k == "set-cookie"]
    session = next(v for v in set_cookie if v.startswith("arvis_console="))
    assert "HttpOnly" in session
    assert "SameSite=strict" in session
    assert "Max-Age=" in session
    assert answer.headers["location"] == "/console"


async def test_a_wrong_key_or_an_agent_key_does_not_sign_in(
    api: Api, browser: httpx.AsyncClient
) -> None:
    form = await browser.get("/console/sign-in")
    token = hidden(form.text, "signin_token")
    wrong = await browser.post(
        "/console/sign-in",
        data={"api_key": "arvis_k0000000000000000_" + "x" * 43, "signin_token": token},
    )
    assert wrong.status_code == 401
    assert "That API key was not accepted." in text_of(wrong.text)
    agent = await browser.post(
        "/console/sign-in", data={"api_key": api.tokens["acme:agent"], "signin_token": token}
    )
    assert agent.status_code == 403
    assert "arvis_console" not in browser.cookies


async def test_signing_in_without_the_forms_token_is_refused(
    api: Api, browser: httpx.AsyncClient
) -> None:
    refused = await browser.post("/console/sign-in", data={"api_key": api.tokens["acme:approver"]})
    assert refused.status_code == 403
    assert 'data-code="csrf_invalid"' in refused.text
    assert "arvis_console" not in browser.cookies


async def test_pages_need_a_session_and_send_the_browser_to_sign_in(
    browser: httpx.AsyncClient,
) -> None:
    answer = await browser.get("/console/approvals")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?next=%2Fconsole%2Fapprovals"
    posted = await browser.post("/console/confirmations/cnf_x/approve", data={"csrf_token": "x"})
    assert posted.status_code == 401


async def test_an_approver_approves_from_the_queue_and_the_re_post_runs(
    api: Api, browser: httpx.AsyncClient
) -> None:
    cid = await _pending(api, "run-approve", "from the console")
    csrf = await sign_in(browser, api.tokens["acme:approver"])
    queue = text_of((await browser.get("/console/approvals")).text)
    assert "files.append" in queue
    assert "from the console" in queue
    assert "agent-of-acme" in queue
    assert "0 of 1 approval" in queue
    assert "mutating" in queue
    assert "replay unsafe" in queue

    refused = await browser.post(f"/console/confirmations/{cid}/approve", data={})
    assert refused.status_code == 403
    assert 'data-code="csrf_invalid"' in refused.text
    forged = await browser.post(
        f"/console/confirmations/{cid}/approve", data={"csrf_token": "0" * 64}
    )
    assert forged.status_code == 403
    assert api.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", cid) == [
        ("PENDING",)
    ]

    done = await browser.post(f"/console/confirmations/{cid}/approve", data={"csrf_token": csrf})
    assert done.status_code == 303
    after = text_of((await browser.get(done.headers["location"])).text)
    assert f"files.append ( {cid} ) is now approved" in after
    assert cid not in text_of((await browser.get("/console/approvals")).text)
    page = text_of((await browser.get(f"/console/confirmations/{cid}")).text)
    assert "Decided by approver-of-acme" in page
    decided = text_of((await browser.get("/console/approvals?tab=decided")).text)
    assert cid in decided

    ran = await api.syscall(
        "files.append",
        {"path": "run-approve.txt", "line": "from the console"},
        run_id="run-approve",
        causal_id="c-1",
    )
    assert ran.json()["outcome"] == "executed", ran.text


async def test_deny_records_the_reason_and_who_denied(api: Api, browser: httpx.AsyncClient) -> None:
    cid = await _pending(api, "run-deny", "no thanks")
    csrf = await sign_in(browser, api.tokens["acme:approver"])
    done = await browser.post(
        f"/console/confirmations/{cid}/deny", data={"csrf_token": csrf, "reason": "not today"}
    )
    assert done.status_code == 303
    page = text_of((await browser.get(f"/console/confirmations/{cid}")).text)
    assert "denied" in page
    assert "approver-of-acme" in page
    assert "“not today”" in page


async def test_the_four_eyes_rule_holds_on_the_console(
    api: Api, browser: httpx.AsyncClient
) -> None:
    # The admin key asks, then tries to approve its own request.
    asked = await api.syscall(
        "files.append",
        {"path": "own.txt", "line": "mine"},
        run_id="run-own",
        causal_id="c-1",
        who="acme:admin",
    )
    cid = asked.json()["confirmation"]["id"]
    csrf = await sign_in(browser, api.tokens["acme:admin"])
    answer = await browser.post(f"/console/confirmations/{cid}/approve", data={"csrf_token": csrf})
    assert answer.status_code == 403
    assert 'data-code="self_approval"' in answer.text


async def test_roles_decide_which_pages_a_session_sees(api: Api) -> None:
    cases = {
        "acme:approver": {"/console/approvals": 200, "/console/runs": 403, "/console/keys": 403},
        "acme:auditor": {"/console/approvals": 403, "/console/runs": 200, "/console/keys": 403},
        "acme:admin": {"/console/approvals": 200, "/console/runs": 200, "/console/keys": 200},
    }
    for who, pages in cases.items():
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
            await sign_in(client, api.tokens[who])
            for path, status in pages.items():
                assert (await client.get(path)).status_code == status, (who, path)
            nav = (await client.get("/console")).headers["location"]
            assert nav == ("/console/runs" if who == "acme:auditor" else "/console/approvals")


async def test_another_tenant_sees_nothing_of_the_first(
    api: Api, browser: httpx.AsyncClient
) -> None:
    cid = await _pending(api, "run-private", "acme only")
    await sign_in(browser, api.tokens["globex:admin"])
    assert (await browser.get(f"/console/confirmations/{cid}")).status_code == 404
    assert (await browser.get("/console/runs/run-private")).status_code == 404
    assert cid not in (await browser.get("/console/approvals")).text
    assert "run-private" not in (await browser.get("/console/runs")).text
    keys = (await browser.get("/console/keys")).text
    assert "of-acme" not in keys
    assert "admin-of-globex" in keys
    csrf = hidden((await browser.get("/console/approvals")).text)
    answer = await browser.post(f"/console/confirmations/{cid}/approve", data={"csrf_token": csrf})
    assert answer.status_code == 404
    assert api.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", cid) == [
        ("PENDING",)
    ]


async def test_a_payload_with_script_is_shown_as_text(api: Api, browser: httpx.AsyncClient) -> None:
    evil = "<script>alert('x')</script>"
    ran = await api.syscall("echo", {"say": evil}, run_id="run-<x>", causal_id="c-1")
    assert ran.status_code == 422  # ids are plain; the payload is where text goes
    ran = await api.syscall("echo", {"say": evil}, run_id="run-script", causal_id="c-1")
    assert ran.json()["outcome"] == "executed", ran.text
    await _pending(api, "run-script-2", evil)
    await sign_in(browser, api.tokens["acme:admin"])
    for path in ("/console/runs/run-script", "/console/approvals"):
        page = (await browser.get(path)).text
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(" in page
        assert evil in text_of(page)


async def test_the_run_page_shows_the_chain_and_where_it_breaks(
    api: Api, browser: httpx.AsyncClient
) -> None:
    for step in ("c-1", "c-2", "c-3"):
        await api.syscall("echo", {"step": step}, run_id="run-chain", causal_id=step)
    await sign_in(browser, api.tokens["acme:auditor"])
    page = text_of((await browser.get("/console/runs/run-chain")).text)
    assert "Chain verified (3 entries)" in page
    assert "#1" in page
    assert "EFFECT_COMPLETED" in page
    assert "executed" in page
    runs = text_of((await browser.get("/console/runs?q=chain")).text)
    assert "running run-chain agent-of-acme echo" in runs
    assert "Runs matching the filters" in runs
    api.sql(
        "UPDATE journal_entries SET body = replace(body, 'c-2', 'c-X')"
        " WHERE run_id = 'run-chain' AND position = 2"
    )
    broken = text_of((await browser.get("/console/runs/run-chain")).text)
    assert "Chain broken at position 2" in broken
    fragment = await browser.get("/console/runs/run-chain?fragment=true")
    assert "Chain broken at position 2" in fragment.text
    assert "<html" not in fragment.text


@pytest.fixture
async def uncertain(api: Api) -> AsyncIterator[tuple[Harness, str]]:
    harness = await make_harness(api.database_url, instance_id="crashing-console")
    try:
        key = await crash_during_dispatch(harness, "write", {"text": "t"}, causal_id="c-u")
        await harness.lifecycle.sweeper.sweep()
        yield harness, key
    finally:
        await harness.close()


async def test_an_uncertain_outcome_is_called_out_and_resolved_from_the_run_page(
    api: Api, browser: httpx.AsyncClient, uncertain: tuple[Harness, str]
) -> None:
    harness, key = uncertain
    run = f"/console/runs/{harness.run_id}"
    csrf = await sign_in(browser, api.tokens["acme:admin"])
    page = text_of((await browser.get(run)).text)
    assert "Uncertain outcomes" in page
    assert "EFFECT_STATE_UNKNOWN" in page
    assert "Not even known whether the effect started" in page
    resolve = f"{run}/attempts/{key}/1/resolve"
    bad = await browser.post(resolve, data={"csrf_token": csrf, "as": "maybe", "evidence": "x"})
    assert bad.status_code == 422
    done = await browser.post(
        resolve, data={"csrf_token": csrf, "as": "not_started", "evidence": "no such request"}
    )
    assert done.status_code == 303, done.text
    after = text_of((await browser.get(run)).text)
    assert "Uncertain outcomes" not in after
    assert "resolved as EFFECT_NOT_STARTED by admin-of-acme: no such request" in after
    again = await browser.post(
        resolve, data={"csrf_token": csrf, "as": "completed", "evidence": "twice"}
    )
    assert again.status_code == 409
    assert 'data-code="already_resolved"' in again.text


async def test_a_not_started_from_the_console_does_not_rerun_a_quorum_consent(
    api: Api, browser: httpx.AsyncClient
) -> None:
    """Issue 23 through the Resolve form: an admin outside the tool's group resolves a
    quorum-2 consented call not started; the re-post waits for a new round."""
    payload = {"target": "console-renew"}
    asked = await api.syscall("probe.unsure", payload, run_id="run-con-q", causal_id="c-1")
    cid = asked.json()["confirmation"]["id"]
    for lead in ("acme:lead-a", "acme:lead-b"):
        approved = await api.client.post(f"/v1/confirmations/{cid}/approve", headers=api.auth(lead))
        assert approved.status_code == 200, approved.text
    ran = await api.syscall("probe.unsure", payload, run_id="run-con-q", causal_id="c-1")
    key = ran.json()["idempotency_key"]
    csrf = await sign_in(browser, api.tokens["acme:admin"])

    done = await browser.post(
        f"/console/runs/run-con-q/attempts/{key}/1/resolve",
        data={"csrf_token": csrf, "as": "not_started", "evidence": "no such request"},
    )

    assert done.status_code == 303, done.text
    again = await api.syscall("probe.unsure", payload, run_id="run-con-q", causal_id="c-1")
    assert again.json()["outcome"] == "confirmation_required", again.text
    assert RUNS["console-renew"] == 1
    queue = text_of((await browser.get("/console/approvals")).text)
    assert "probe.unsure" in queue


async def test_signing_out_ends_the_session_for_the_old_cookie(
    api: Api, browser: httpx.AsyncClient
) -> None:
    csrf = await sign_in(browser, api.tokens["acme:auditor"])
    old = browser.cookies["arvis_console"]
    out = await browser.post("/console/sign-out", data={"csrf_token": csrf})
    assert out.status_code == 303
    assert out.headers["location"] == "/console/sign-in"
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://arvis.test", cookies={"arvis_console": old}
    ) as replayed:
        assert (await replayed.get("/console/runs")).status_code == 303


async def test_sign_out_without_the_token_is_refused(api: Api, browser: httpx.AsyncClient) -> None:
    await sign_in(browser, api.tokens["acme:auditor"])
    assert (await browser.post("/console/sign-out", data={})).status_code == 403
    assert (await browser.get("/console/runs")).status_code == 200


async def test_a_revoked_keys_session_stops_working(api: Api, browser: httpx.AsyncClient) -> None:
    from arvis.store.database import PgStore
    from arvis.store.keys import PgKeyStore

    store = await PgStore.open(api.database_url)
    try:
        record, issued = await PgKeyStore(store.engine, store.ops).create(
            "acme", "short-lived", ["auditor"]
        )
        await sign_in(browser, issued.token)
        assert (await browser.get("/console/runs")).status_code == 200
        assert await PgKeyStore(store.engine, store.ops).revoke(record.key_id)
    finally:
        await store.close()
    assert (await browser.get("/console/runs")).status_code == 303


async def test_an_admin_creates_a_key_sees_its_token_once_and_revokes_it(
    api: Api, browser: httpx.AsyncClient
) -> None:
    csrf = await sign_in(browser, api.tokens["acme:admin"])
    created = await browser.post(
        "/console/keys",
        data={
            "csrf_token": csrf,
            "principal": "new-lead",
            "role_approver": "on",
            "groups": "payments-leads",
        },
    )
    assert created.status_code == 201
    token = next(part for part in created.text.split('"') if part.startswith("arvis_k"))
    assert "Copy" in created.text
    listed = (await browser.get("/console/keys")).text
    assert token not in listed
    assert "new-lead" in listed
    assert "payments-leads" in listed
    key_id = token.split("_")[1]
    revoked = await browser.post(f"/console/keys/{key_id}/revoke", data={"csrf_token": csrf})
    assert revoked.status_code == 303
    answer = await api.client.get("/v1/confirmations", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    bad = await browser.post("/console/keys", data={"csrf_token": csrf, "principal": "x"})
    assert bad.status_code == 422


def _secured(answer: httpx.Response) -> bool:
    csp = answer.headers.get("content-security-policy", "")
    return (
        "default-src 'none'" in csp
        and "frame-ancestors 'none'" in csp
        and "script-src 'self'" in csp
        and "unsafe-inline" not in csp
        and answer.headers.get("x-frame-options") == "DENY"
        and answer.headers.get("x-content-type-options") == "nosniff"
        and answer.headers.get("cache-control") == "no-store"
    )


async def test_console_answers_carry_the_security_headers(
    api: Api, browser: httpx.AsyncClient
) -> None:
    for path in ("/console/sign-in", "/console/static/console.css", "/console/runs"):
        answer = await browser.get(path)
        assert _secured(answer), (path, answer.headers)


async def test_every_console_error_carries_the_security_headers_too(
    api: Api, browser: httpx.AsyncClient
) -> None:
    signed_out = await browser.get("/console/nowhere-page")
    await sign_in(browser, api.tokens["acme:approver"])
    answers = {
        "unknown page, signed out": signed_out,
        "unknown page": await browser.get("/console/nowhere-page"),
        "unknown nested page": await browser.get("/console/runs/r/nowhere/deeper"),
        "unknown page, posted": await browser.post("/console/nowhere-page", data={"a": "b"}),
        "wrong method": await browser.get("/console/sign-out"),
        "body over the server's limit": await browser.post(
            "/console/sign-in", content=b"a=" + b"x" * (70 * 1024)
        ),
    }
    statuses = {what: answer.status_code for what, answer in answers.items()}
    assert statuses == {
        "unknown page, signed out": 404,
        "unknown page": 404,
        "unknown nested page": 404,
        "unknown page, posted": 404,
        "wrong method": 405,
        "body over the server's limit": 413,
    }
    unsecured = [what for what, answer in answers.items() if not _secured(answer)]
    assert unsecured == []
    # A page the console does not have is a console page, in the console's look.
    page = answers["unknown page"]
    assert page.headers["content-type"].startswith("text/html")
    assert 'data-code="not_found"' in page.text


@pytest.mark.parametrize(
    ("target", "lands"),
    [
        ("/console/approvals", "/console/approvals"),
        ("/console/runs/../approvals", "/console/approvals"),
        ("/console/./runs", "/console/runs"),
        ("/console/runs/%2e%2e/keys", "/console/keys"),
        ("/console/runs?tenant=x", "/console/runs?tenant=x"),
        ("/console/../../x", None),
        ("/console/..", None),
        ("/console/%2E%2E/%2e%2e/x", None),
        ("/console/runs/../../x", None),
        ("/consoles", None),
        ("//evil.test/console", None),
        ("https://evil.test/console", None),
        ("/console\\..\\x", None),
    ],
)
async def test_next_lands_only_on_a_normalised_console_page(
    api: Api, target: str, lands: str | None
) -> None:
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
        form = await client.get("/console/sign-in", params={"next": target})
        assert form.status_code == 200, form.text
        answer = await client.post(
            "/console/sign-in",
            data={
                "api_key": api.tokens["acme:admin"],
                "signin_token": hidden(form.text, "signin_token"),
                "next": target,
            },
        )
        again = await client.get("/console/sign-in", params={"next": target})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == (lands or "/console")
    # Signed in already, the sign-in page sends the browser on the same way.
    assert again.headers["location"] == (lands or "/console/approvals")


async def test_a_console_form_is_bounded_in_size(api: Api, browser: httpx.AsyncClient) -> None:
    csrf = await sign_in(browser, api.tokens["acme:approver"])
    answer = await browser.post(
        "/console/confirmations/cnf_x/deny", data={"csrf_token": csrf, "reason": "r" * 20_000}
    )
    assert answer.status_code == 413
    json_body = await browser.post("/console/confirmations/cnf_x/deny", json={"csrf_token": csrf})
    assert json_body.status_code == 415

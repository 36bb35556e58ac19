"""Console sign-in through the OpenID provider (issue 26, item 3), against the real
loopback provider of tests/support/oidc: the whole authorization-code flow with PKCE
driven over HTTP the way a browser follows it, the session it gives, sign-out at both
ends, and each hostile callback refused with its code, as a page, with no session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import time
from html import unescape
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
import psycopg
import pytest

from arvis.store.engine import libpq_url
from tests.support.identity import CONSOLE_SECRET_ENV
from tests.support.mcp_client import Served
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.db

_FORM = re.compile(r'<form[^>]*action="([^"]+)"')


def browser() -> httpx.Client:
    return httpx.Client(follow_redirects=True, timeout=30)


def sign_in(
    http: httpx.Client, oidc_console: Served, idp: OidcProvider, who: str
) -> httpx.Response:
    """Start at the console's button, log in at the provider, land on the callback."""
    login = http.get(f"{oidc_console.url}/console/oidc/start", params={"issuer": 0})
    assert login.status_code == 200, login.text
    assert str(login.url).startswith(idp.issuer)
    action = unescape(_FORM.search(login.text).group(1))  # type: ignore[union-attr]
    return http.post(
        urljoin(str(login.url), action),
        data={"username": who, "password": idp.user(who)["password"]},
    )


def code_of(page: httpx.Response) -> str:
    found = re.search(r'data-code="([a-z_]+)"', page.text)
    assert found, page.text[:800]
    return found.group(1)


def sessions_of(oidc_console: Served, principal: str) -> list[tuple[object, object]]:
    with psycopg.connect(libpq_url(oidc_console.database_url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT key_id, identity FROM console_sessions WHERE identity->>'principal_id' = %s",
            (principal,),
        ).fetchall()
    return [(row[0], row[1]) for row in rows]


def test_the_sign_in_page_offers_the_provider(oidc_console: Served) -> None:
    page = httpx.get(f"{oidc_console.url}/console/sign-in")
    assert "Sign in with the test provider" in page.text
    assert "API key" in page.text  # key sign-in stays beside it


def test_an_approver_signs_in_through_the_provider_and_out_at_both_ends(
    oidc_console: Served, oidc_provider: OidcProvider
) -> None:
    with browser() as http:
        landed = sign_in(http, oidc_console, oidc_provider, "alice")
        assert landed.status_code == 200, landed.text
        assert urlparse(str(landed.url)).path == "/console/oidc/callback"
        assert "Continue to the console" in landed.text
        cookie = landed.headers["set-cookie"]
        assert "arvis_console=" in cookie
        assert "HttpOnly" in cookie
        assert "samesite=strict" in cookie.lower()
        approvals = http.get(f"{oidc_console.url}/console/approvals")
        assert approvals.status_code == 200
        assert "alice" in approvals.text
        [(key_id, identity)] = sessions_of(oidc_console, "alice")
        assert key_id is None
        assert identity["method"] == "oidc"  # type: ignore[index]
        assert identity["issuer"] == oidc_provider.issuer  # type: ignore[index]
        assert identity["groups"] == ["ops"]  # type: ignore[index]
        assert identity["roles"] == ["approver"]  # type: ignore[index]

        form = re.search(r'name="csrf_token" value="([^"]+)"', approvals.text)
        assert form, approvals.text[:800]
        out = http.post(
            f"{oidc_console.url}/console/sign-out",
            data={"csrf_token": form.group(1)},
            follow_redirects=False,
        )
        assert out.status_code == 200
        assert f"url={oidc_provider.issuer}/session/end?" in unescape(out.text)
        assert sessions_of(oidc_console, "alice") == []
        assert http.get(f"{oidc_console.url}/console/approvals").url.path == "/console/sign-in"


def test_a_person_without_a_console_role_gets_no_session(
    oidc_console: Served, oidc_provider: OidcProvider
) -> None:
    with browser() as http:
        landed = sign_in(http, oidc_console, oidc_provider, "dave")  # an agent
    assert landed.status_code == 403
    assert code_of(landed) == "forbidden_role"
    assert "arvis_console=" not in landed.headers.get("set-cookie", "")
    assert sessions_of(oidc_console, "dave") == []


def test_a_callback_this_browser_did_not_start_is_refused(oidc_console: Served) -> None:
    with browser() as http:
        answer = http.get(f"{oidc_console.url}/console/oidc/callback?code=x&state=y")
    assert answer.status_code == 400
    assert code_of(answer) == "oidc_state_invalid"


def started(http: httpx.Client, oidc_console: Served) -> dict[str, list[str]]:
    """A sign-in started (the flow cookie set), its authorization request's query."""
    answer = http.get(
        f"{oidc_console.url}/console/oidc/start", params={"issuer": 0}, follow_redirects=False
    )
    assert answer.status_code == 303
    return parse_qs(urlparse(answer.headers["location"]).query)


def test_a_state_that_is_not_the_sign_ins_is_refused(oidc_console: Served) -> None:
    with browser() as http:
        query = started(http, oidc_console)
        assert query["code_challenge_method"] == ["S256"]
        assert query["nonce"]
        answer = http.get(f"{oidc_console.url}/console/oidc/callback?code=x&state=another")
    assert answer.status_code == 400
    assert code_of(answer) == "oidc_state_invalid"


def test_the_providers_error_is_shown_with_its_code(oidc_console: Served) -> None:
    with browser() as http:
        state = started(http, oidc_console)["state"][0]
        answer = http.get(
            f"{oidc_console.url}/console/oidc/callback",
            params={"state": state, "error": "access_denied", "error_description": "cancelled"},
        )
    assert answer.status_code == 401
    assert code_of(answer) == "oidc_denied"
    assert "cancelled" in answer.text


def test_a_code_the_provider_refuses_is_refused(oidc_console: Served) -> None:
    with browser() as http:
        state = started(http, oidc_console)["state"][0]
        answer = http.get(
            f"{oidc_console.url}/console/oidc/callback", params={"state": state, "code": "forged"}
        )
    assert answer.status_code == 401
    assert code_of(answer) == "oidc_exchange_failed"


def _forged_flow(secret: str, **flow: object) -> str:
    body = base64.urlsafe_b64encode(json.dumps(flow, separators=(",", ":")).encode()).decode()
    key = hmac.new(secret.encode(), b"arvis-console-oidc-flow-v1", hashlib.sha256).digest()
    return f"{body}.{hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}"


def test_an_id_token_of_another_sign_ins_nonce_is_refused(
    oidc_console: Served, oidc_provider: OidcProvider
) -> None:
    # A flow cookie (signed with the real key) whose nonce is not the one the provider
    # put in the ID token: the token verifies, but it is not this sign-in's.
    with browser() as http:
        query = started(http, oidc_console)
        login = http.get(f"{oidc_provider.issuer}/auth", params={k: v[0] for k, v in query.items()})
        action = unescape(_FORM.search(login.text).group(1))  # type: ignore[union-attr]
        secret = os.environ[CONSOLE_SECRET_ENV]
        cookie = http.cookies.get("arvis_console_oidc")
        assert cookie is not None
        flow = json.loads(base64.urlsafe_b64decode(cookie.rpartition(".")[0]))
        http.cookies.set(
            "arvis_console_oidc",
            _forged_flow(
                secret, **{**flow, "nonce": "not-the-nonce", "exp": int(time.time()) + 60}
            ),
            domain="127.0.0.1",
            path="/console/oidc",
        )
        answer = http.post(
            urljoin(str(login.url), action),
            data={"username": "alice", "password": oidc_provider.user("alice")["password"]},
        )
    assert answer.status_code == 401
    assert code_of(answer) == "token_claim_invalid"
    assert "arvis_console=" not in answer.headers.get("set-cookie", "")


def test_a_flow_cookie_signed_with_another_key_is_refused(oidc_console: Served) -> None:
    with browser() as http:
        state = started(http, oidc_console)["state"][0]
        cookie = http.cookies.get("arvis_console_oidc")
        assert cookie is not None
        flow = json.loads(base64.urlsafe_b64decode(cookie.rpartition(".")[0]))
        http.cookies.set(
            "arvis_console_oidc",
            _forged_flow("not-the-secret", **flow),
            domain="127.0.0.1",
            path="/console/oidc",
        )
        answer = http.get(
            f"{oidc_console.url}/console/oidc/callback", params={"state": state, "code": "x"}
        )
    assert answer.status_code == 400
    assert code_of(answer) == "oidc_state_invalid"

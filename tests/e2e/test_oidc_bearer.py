"""JWT bearer tokens of a trusted issuer (issue 26), against a real OpenID provider
(tests/support/oidc): an agent's token runs a governed tool over HTTP, ``/mcp`` and the
client; a person's token reads the journal; every hostile token is refused with its
stable code on both entry points, as a problem, never a 500.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from joserfc.jwk import RSAKey

from arvis.client import ArvisClient, Executed
from tests.support.identity import trust
from tests.support.mcp_client import Served, meta_of, serve_arvis
from tests.support.oidc import ARVIS_SCOPE, OidcProvider, running_provider, unverified_header

pytestmark = [
    pytest.mark.db,
    pytest.mark.filterwarnings("ignore:EdDSA is deprecated:joserfc.errors.SecurityWarning"),
]

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    # No leeway: a token one second past its exp is expired.
    config = trust(oidc_provider.issuer, leeway_s=0)
    with serve_arvis(database_url, tmp_path_factory.mktemp("arvis-oidc"), config) as running:
        yield running


def syscall(run_id: str, tool: str = "echo", payload: dict[str, Any] | None = None) -> Any:
    return {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": "c-1",
        "decision": {"tool": tool, "payload": payload or {"hello": "idp"}},
    }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
async def test_an_agents_idp_token_runs_a_governed_tool_over_http_journaled_as_its_principal(
    served: Served, oidc_provider: OidcProvider, alg: str
) -> None:
    agent = oidc_provider.agent_token(alg=alg)
    run_id = f"run-jwt-http-{alg.lower()}"
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        answer = await http.post("/v1/syscalls", json=syscall(run_id), headers=bearer(agent))
        assert answer.status_code == 200, answer.text
        assert answer.json()["outcome"] == "executed"
        auditor = oidc_provider.user_token("bob")  # auditor of acme, through the sign-in flow
        journal = await http.get(f"/v1/runs/{run_id}/journal", headers=bearer(auditor))
    assert journal.status_code == 200, journal.text
    [entry] = journal.json()["entries"]
    context = entry["body"]["context"]
    assert (context["tenant_id"], context["principal_id"]) == ("acme", "arvis-agent")
    assert (context["auth_method"], context["key_id"]) == ("oidc", None)


async def test_an_agents_idp_token_runs_a_governed_tool_over_mcp(
    served: Served, oidc_provider: OidcProvider
) -> None:
    served.tokens["jwt:acme:agent"] = oidc_provider.agent_token()
    async with served.client("jwt:acme:agent") as client:
        result = await client.call_tool("echo", {"over": "mcp"})
    assert not result.is_error
    meta = meta_of(result)
    assert meta["arvis.dev/outcome"] == "executed"


async def test_the_client_takes_a_jwt_as_its_bearer_token(
    served: Served, oidc_provider: OidcProvider
) -> None:
    token = oidc_provider.agent_token()
    with ArvisClient(served.url, token) as client:
        answer = client.execute("run-jwt-client", "c-1", "echo", {"via": "client"})
    assert isinstance(answer, Executed)


def _b64(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(token: str) -> dict[str, Any]:
    segment = token.split(".")[1]
    parsed: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return parsed


def _alg_none(idp: OidcProvider) -> str:
    _, claims, _ = idp.agent_token().split(".")
    return f"{_b64({'alg': 'none', 'typ': 'at+jwt'})}.{claims}."


def _hs256_with_the_public_key(idp: OidcProvider) -> str:
    token = idp.agent_token()
    kid = unverified_header(token)["kid"]
    [jwk] = [key for key in idp.jwks()["keys"] if key["kid"] == kid]
    public = RSAKey.import_key(jwk).as_pem(private=False)
    claims = {**_claims(token), "arvis_roles": ["admin"]}
    signing_input = f"{_b64({'alg': 'HS256', 'kid': kid})}.{_b64(claims)}"
    return (
        f"{signing_input}.{_b64(hmac.new(public, signing_input.encode(), hashlib.sha256).digest())}"
    )


def _another_issuer(_: OidcProvider) -> str:
    with running_provider() as other:
        return other.agent_token()


def _another_audience(idp: OidcProvider) -> str:
    return idp.token_exchange(idp.user_token("dave"), audience="urn:tool:example").access_token


def _expired(idp: OidcProvider) -> str:
    idp.put_resource("urn:arvis:brief", audience="arvis", scope=ARVIS_SCOPE, ttl=1)
    token = idp.client_credentials(resource="urn:arvis:brief", scope=ARVIS_SCOPE).access_token
    time.sleep(2.1)  # past exp: the deployment allows no leeway
    return token


def _without_roles(idp: OidcProvider) -> str:
    idp.put_user("nora", {"tenant": "acme", "groups": ["ops"]})
    return idp.user_token("nora")


def _tampered(idp: OidcProvider) -> str:
    header, _, signature = idp.agent_token().split(".")
    token = idp.agent_token()
    claims = {**_claims(token), "sub": "carol", "arvis_roles": ["admin"]}
    return f"{header}.{_b64(claims)}.{signature}"


def _unknown_kid(idp: OidcProvider) -> str:
    _, claims, signature = idp.agent_token().split(".")
    return f"{_b64({'alg': 'RS256', 'kid': 'never-published'})}.{claims}.{signature}"


HOSTILE: dict[str, tuple[Callable[[OidcProvider], str], int, str]] = {
    "alg-none": (_alg_none, 401, "token_algorithm_refused"),
    "hs256-public-key": (_hs256_with_the_public_key, 401, "token_algorithm_refused"),
    "another-issuer": (_another_issuer, 401, "token_issuer_untrusted"),
    "another-audience": (_another_audience, 401, "token_audience_mismatch"),
    "expired": (_expired, 401, "token_expired"),
    "no-role-claim": (_without_roles, 403, "token_roles_missing"),
    "tampered": (_tampered, 401, "token_signature_invalid"),
    "unknown-kid": (_unknown_kid, 401, "token_key_unknown"),
    "not-a-jwt": (lambda _: "eyJhbGciOi.eyJzdWIi", 401, "unauthenticated"),
}


@pytest.fixture(scope="module")
def hostile_tokens(oidc_provider: OidcProvider) -> dict[str, str]:
    return {name: make(oidc_provider) for name, (make, _, _) in HOSTILE.items()}


@pytest.mark.parametrize("entry", ["http", "mcp"])
@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_hostile_token_is_refused_with_its_code_on_every_entry_point(
    served: Served, hostile_tokens: dict[str, str], case: str, entry: str
) -> None:
    _, status, code = HOSTILE[case]
    headers = bearer(hostile_tokens[case])
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        if entry == "http":
            answer = await http.post("/v1/syscalls", json=syscall(f"run-{case}"), headers=headers)
        else:
            answer = await http.post("/mcp", json=TOOLS_LIST, headers={**MCP_HEADERS, **headers})
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["code"] == code
    if status == 401:
        assert answer.headers["www-authenticate"] == "Bearer"
    assert all(run != f"run-{case}" for _, run in served.runs())  # nothing recorded

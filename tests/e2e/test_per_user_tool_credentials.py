"""Per-user credentials for remote tools (issue 26), against a real OpenID provider: an
HTTP tool and an upstream MCP server's tool (over streamable HTTP, the SDK's own server
behind bearer authentication: tests/support/upstream/people.py) receive the caller's token
exchanged for their audience (RFC 8693), ARVIS's records and logs hold no token, and a
failed exchange sends nothing (not started). Every test runs for both tool kinds."""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.httpserver import LocalHttpServer
from tests.support.identity import trust
from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import TOOL_AUDIENCE, OidcProvider
from tests.support.postgres import sql
from tests.support.server import running
from tests.support.tracing import Recorded, every_value, recorded
from tests.support.upstream.people import PeopleUpstream

pytestmark = pytest.mark.db

SECRET_ENV = "ARVIS_TEST_EXCHANGE_SECRET"


def config(issuer: str, url: str, mcp_url: str) -> str:
    tool = """
[[tools.http]]
name = "{name}"
description = "A tool that acts with the caller's own authority."
url = "{url}"
effect = "read_only"
replay_safety = "safe"

[tools.http.auth.token_exchange]
token_endpoint = "{issuer}/token"
audience = "{audience}"
client_id = "arvis-exchange"
client_secret_env = "{env}"
"""
    server = """
[[tools.mcp]]
name = "{name}"
url = "{url}"
trust_annotations = true

[tools.mcp.auth.token_exchange]
token_endpoint = "{issuer}/token"
audience = "{audience}"
client_id = "arvis-exchange"
client_secret_env = "{env}"
"""
    common = {"url": url, "issuer": issuer, "env": SECRET_ENV}
    upstream = {"url": mcp_url, "issuer": issuer, "env": SECRET_ENV}
    return (
        trust(issuer)
        + """
[policy.default]
egress_hosts = ["127.0.0.1"]
"""
        + tool.format(name="crm.read", audience=TOOL_AUDIENCE, **common)
        + tool.format(name="crm.unknown", audience="urn:tool:nowhere", **common)
        + server.format(name="people", audience=TOOL_AUDIENCE, **upstream)
        + server.format(name="nowhere", audience="urn:tool:nowhere", **upstream)
    )


KINDS = {"http": ("crm.read", "crm.unknown"), "mcp": ("people.read", "nowhere.read")}
"""Per tool kind: its tool whose audience the provider knows, and one it refuses."""


@dataclass
class Setup:
    served: Served
    tool: LocalHttpServer
    people: PeopleUpstream
    spans: Recorded
    """Every span of the deployment, payloads and results recorded too."""

    def bearers(self, kind: str) -> list[str]:
        """The Authorization of every call that reached ``kind``'s tool, in order."""
        if kind == "http":
            return [request.headers["authorization"] for request in self.tool.received]
        return [call.authorization or "" for call in self.people.calls()]

    def reached(self, kind: str) -> int:
        """How often anything for a caller reached ``kind``'s tool: connections to the HTTP
        tool; requests carrying a token (a caller's session, a call) to the MCP server."""
        if kind == "http":
            return self.tool.connections
        return sum(seen.authorization is not None for seen in list(self.people.seen))


@pytest.fixture(scope="module")
async def setup(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> AsyncIterator[Setup]:
    os.environ[SECRET_ENV] = oidc_provider.client("arvis-exchange")["client_secret"]
    # alice's own session is listed no ``write``: the server describes it to her otherwise.
    people = PeopleUpstream(
        oidc_provider.issuer, oidc_provider.jwks(), TOOL_AUDIENCE, hidden=frozenset({"alice"})
    )
    try:
        async with LocalHttpServer() as tool:
            with running(people) as upstream:
                text = config(oidc_provider.issuer, tool.url(), f"{upstream}/mcp")
                data_dir = tmp_path_factory.mktemp("arvis-pu")
                spans = recorded(record_payloads=True)
                with serve_arvis(database_url, data_dir, text, tracing=spans.tracing) as served:
                    yield Setup(served, tool, people, spans)
    finally:
        os.environ.pop(SECRET_ENV, None)


async def call(
    served: Served, token: str, run_id: str, tool: str, *, person: str | None = None
) -> dict[str, Any]:
    """``tool`` called with ``token`` (and, for an agent acting for someone, the ``person``'s
    token as the subject token)."""
    body = {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": "c-1",
        "decision": {"tool": tool, "payload": {"q": 1}},
    }
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        headers = {"Authorization": f"Bearer {token}"}
        if person is not None:
            headers["Arvis-Subject-Token"] = person
        answer = await http.post("/v1/syscalls", json=body, headers=headers)
    assert answer.status_code in (200, 202), answer.text
    result: dict[str, Any] = answer.json()
    return result


async def approved_call(
    served: Served, token: str, run_id: str, tool: str, *, person: str | None = None
) -> dict[str, Any]:
    """:func:`call`, approved by an approver key and posted again when it needs consent."""
    answer = await call(served, token, run_id, tool, person=person)
    if answer["outcome"] != "confirmation_required":
        return answer
    await served.approve(answer["confirmation"]["id"])
    return await call(served, token, run_id, tool, person=person)


def claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def everything_stored(database_url: str) -> str:
    tables = sql(
        database_url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE'",
    )
    return "\n".join(
        str(row)
        for (table,) in tables
        for row in sql(database_url, f'SELECT t::text FROM "{table}" t')
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_the_tool_receives_the_persons_exchanged_token_and_arvis_keeps_none(
    setup: Setup, oidc_provider: OidcProvider, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.DEBUG)
    dave = oidc_provider.user_token("dave")  # an agent-role person of acme
    before = len(setup.bearers(kind))
    tool, _ = KINDS[kind]
    answer = await call(setup.served, dave, f"run-per-user-{kind}", tool)
    assert answer["outcome"] == "executed", answer
    [authorization] = setup.bearers(kind)[before:]
    scheme, _, sent = authorization.partition(" ")
    assert scheme == "Bearer"
    assert sent != dave
    tool_claims = claims(sent)
    assert (tool_claims["sub"], tool_claims["aud"]) == ("dave", TOOL_AUDIENCE)

    stored = everything_stored(setup.served.database_url)
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    traced = "\n".join(str(value) for _, _, value in every_value(setup.spans.spans))
    assert "arvis.dispatch" in traced
    for secret in (sent, dave):
        for kept in (stored, logged, traced):
            assert secret not in kept
            assert secret.split(".")[2] not in kept  # not even the signature


@pytest.mark.parametrize("kind", KINDS)
async def test_a_failed_exchange_sends_nothing_and_is_not_started(
    setup: Setup, oidc_provider: OidcProvider, kind: str
) -> None:
    before = setup.reached(kind)
    _, refused = KINDS[kind]
    answer = await call(
        setup.served, oidc_provider.user_token("dave"), f"run-no-target-{kind}", refused
    )
    assert answer["boundary"] == "EFFECT_NOT_STARTED", answer
    assert answer["problem"]["code"] == "credential_exchange_failed"
    assert "invalid_target" in answer["problem"]["detail"]
    assert setup.reached(kind) == before


@pytest.mark.parametrize("kind", KINDS)
async def test_an_api_key_caller_has_no_token_to_exchange(setup: Setup, kind: str) -> None:
    before = setup.reached(kind)
    tool, _ = KINDS[kind]
    answer = await call(
        setup.served, setup.served.tokens["acme:agent"], f"run-key-caller-{kind}", tool
    )
    assert answer["boundary"] == "EFFECT_NOT_STARTED", answer
    assert answer["problem"]["code"] == "credential_exchange_failed"
    assert "no token to exchange" in answer["problem"]["detail"]
    assert setup.reached(kind) == before


async def test_two_people_reach_the_mcp_server_each_on_a_session_of_their_own(
    setup: Setup, oidc_provider: OidcProvider
) -> None:
    before = len(setup.people.calls())
    dave = oidc_provider.user_token("dave")
    direct = await call(setup.served, dave, "run-two-dave", "people.read")
    # An agent acting for alice: her token is the one exchanged.
    agent, alice = oidc_provider.agent_token(), oidc_provider.user_token("alice")
    acting = await call(setup.served, agent, "run-two-alice", "people.read", person=alice)
    for answer, person in ((direct, "dave"), (acting, "alice")):
        assert answer["outcome"] == "executed", answer
        assert answer["result"] == {"done": "read", "for": person}
    for_dave, for_alice = setup.people.calls()[before:]
    assert (for_dave.person, for_alice.person) == ("dave", "alice")
    assert for_dave.session is not None
    assert for_alice.session is not None
    assert for_dave.session != for_alice.session
    assert for_dave.bearer != for_alice.bearer


async def test_a_tool_listed_otherwise_to_one_person_is_not_sent_and_says_why(
    setup: Setup, oidc_provider: OidcProvider
) -> None:
    """The server lists ``write`` to the service and to dave, not to alice: on her own
    session the tool is not the one the plan pinned, so nothing is sent, and the problem
    says it is her listing (restarting ARVIS would pin the service's listing again)."""
    writes = len([e for e in setup.people.effects if e[0] == "write"])
    agent, alice = oidc_provider.agent_token(), oidc_provider.user_token("alice")
    answer = await approved_call(
        setup.served, agent, "run-hidden-alice", "people.write", person=alice
    )
    assert answer["boundary"] == "EFFECT_NOT_STARTED", answer
    assert answer["problem"]["code"] == "upstream_changed"
    detail = answer["problem"]["detail"]
    assert "this caller" in detail
    assert "restart" not in detail
    assert len([e for e in setup.people.effects if e[0] == "write"]) == writes

    dave_token = oidc_provider.user_token("dave")
    dave = await approved_call(setup.served, dave_token, "run-dave-w", "people.write")
    assert dave["outcome"] == "executed", dave

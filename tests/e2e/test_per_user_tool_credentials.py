"""Per-user credentials for remote tools (issue 26), against a real OpenID provider: the
HTTP tool receives the caller's token exchanged for its audience (RFC 8693), ARVIS's
records and logs hold no token, and a failed exchange sends nothing (not started)."""

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

pytestmark = pytest.mark.db

SECRET_ENV = "ARVIS_TEST_EXCHANGE_SECRET"


def config(issuer: str, url: str) -> str:
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
    common = {"url": url, "issuer": issuer, "env": SECRET_ENV}
    return (
        trust(issuer)
        + """
[policy.default]
egress_hosts = ["127.0.0.1"]
"""
        + tool.format(name="crm.read", audience=TOOL_AUDIENCE, **common)
        + tool.format(name="crm.unknown", audience="urn:tool:nowhere", **common)
    )


@dataclass
class Setup:
    served: Served
    tool: LocalHttpServer


@pytest.fixture(scope="module")
async def setup(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> AsyncIterator[Setup]:
    os.environ[SECRET_ENV] = oidc_provider.client("arvis-exchange")["client_secret"]
    try:
        async with LocalHttpServer() as tool:
            text = config(oidc_provider.issuer, tool.url())
            with serve_arvis(database_url, tmp_path_factory.mktemp("arvis-pu"), text) as served:
                yield Setup(served, tool)
    finally:
        os.environ.pop(SECRET_ENV, None)


async def call(served: Served, token: str, run_id: str, tool: str) -> dict[str, Any]:
    body = {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": "c-1",
        "decision": {"tool": tool, "payload": {"q": 1}},
    }
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        answer = await http.post(
            "/v1/syscalls", json=body, headers={"Authorization": f"Bearer {token}"}
        )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


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


async def test_the_tool_receives_the_persons_exchanged_token_and_arvis_keeps_none(
    setup: Setup, oidc_provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dave = oidc_provider.user_token("dave")  # an agent-role person of acme
    before = len(setup.tool.received)
    answer = await call(setup.served, dave, "run-per-user", "crm.read")
    assert answer["outcome"] == "executed", answer
    [request] = setup.tool.received[before:]
    scheme, _, sent = request.headers["authorization"].partition(" ")
    assert scheme == "Bearer"
    assert sent != dave
    tool_claims = claims(sent)
    assert (tool_claims["sub"], tool_claims["aud"]) == ("dave", TOOL_AUDIENCE)

    stored = everything_stored(setup.served.database_url)
    logged = "\n".join(record.getMessage() for record in caplog.records) + caplog.text
    for secret in (sent, dave):
        assert secret not in stored
        assert secret not in logged
        assert secret.split(".")[2] not in stored  # not even the signature


async def test_a_failed_exchange_sends_nothing_and_is_not_started(
    setup: Setup, oidc_provider: OidcProvider
) -> None:
    before = setup.tool.connections
    answer = await call(
        setup.served, oidc_provider.user_token("dave"), "run-no-target", "crm.unknown"
    )
    assert answer["boundary"] == "EFFECT_NOT_STARTED", answer
    assert answer["problem"]["code"] == "credential_exchange_failed"
    assert "invalid_target" in answer["problem"]["detail"]
    assert setup.tool.connections == before


async def test_an_api_key_caller_has_no_token_to_exchange(setup: Setup) -> None:
    before = setup.tool.connections
    answer = await call(
        setup.served, setup.served.tokens["acme:agent"], "run-key-caller", "crm.read"
    )
    assert answer["boundary"] == "EFFECT_NOT_STARTED", answer
    assert "no token to exchange" in answer["problem"]["detail"]
    assert setup.tool.connections == before

"""Per-user credentials of an upstream MCP server (issue 26): ``auth`` is for a ``url``
server without an Authorization header of its own; a call goes out for its caller with
the caller's exchanged token, or is refused before anything is sent; the callers'
sessions are bounded, the least recently used idle one closed first, and one with a
caller in it never."""

from __future__ import annotations

from typing import Any

import httpx
import mcp_types as types
import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ConfigurationError
from arvis.domain.identity import Actor
from arvis.domain.ids import PrincipalId, TenantId
from arvis.tools import ToolDispatcher
from arvis.tools.base import ToolInvocation
from arvis.tools.credentials import TokenExchangeConfig, TokenExchanger, caller_token
from arvis.tools.mcp.callers import Caller, CallerSessions
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import McpTool, open_servers
from arvis.tools.mcp.upstream import UpstreamServer, UpstreamUnavailable
from arvis.tools.registry import parse_tools_config
from tests.support.fakes import context, definition, invocation, read_only
from tests.unit.mcp.test_upstream_calls import FakeUpstream, answers

EXCHANGE = {
    "token_endpoint": "https://idp.example/token",
    "audience": "urn:tool:crm",
    "client_id": "arvis",
    "client_secret_env": "CRM_SECRET",
}
URL = "https://crm.example/mcp"


def entry(**fields: Any) -> dict[str, Any]:
    return {"name": "crm", "url": URL, "auth": {"token_exchange": EXCHANGE}, **fields}


def refusal(declared: dict[str, Any]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({"mcp": [declared]})
    return str(caught.value)


def test_a_url_server_may_declare_auth_and_keeps_its_other_headers() -> None:
    [server] = parse_tools_config(
        {"mcp": [entry(headers={"X-Zone": "eu"}, headers_env={"X-Service": "SVC"})]}
    ).mcp
    assert server.auth is not None
    assert server.auth.token_exchange.audience == "urn:tool:crm"
    assert server.user_sessions == 32


@pytest.mark.parametrize("header", ["Authorization", "authorization"])
def test_auth_and_an_authorization_header_of_its_own_are_refused(header: str) -> None:
    message = refusal(entry(headers_env={header: "CRM_TOKEN"}))
    assert "auth sends the exchanged token as Authorization" in message


def test_auth_is_for_a_url_server_only() -> None:
    declared = entry(command=["crm"])
    del declared["url"]
    assert "auth is for a url server" in refusal(declared)


@pytest.mark.parametrize("bound", [0, 5000])
def test_the_bound_on_per_user_sessions_is_a_sane_number(bound: int) -> None:
    assert "user_sessions" in refusal(entry(user_sessions=bound))


async def test_a_missing_client_secret_stops_start_up_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    config = McpServerConfig.model_validate(entry(url="http://127.0.0.1:9/mcp"))
    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as http:
        with pytest.raises(ConfigurationError, match="CRM_SECRET is not set"):
            await open_servers([config], {}, http=http)
    assert sent == []


# -- a call ---------------------------------------------------------------------------


def exchanger(answer: httpx.Response) -> TokenExchanger:
    config = TokenExchangeConfig.model_validate(EXCHANGE)
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: answer))
    return TokenExchanger(config, "secret", http)


def of(person: AuthorizedEffectContext) -> ToolInvocation:
    made = invocation("crm.update", {"id": 1})
    return ToolInvocation.create(
        tool=made.tool, payload=made.payload, context=person, call_id=made.call_id
    )


DONE = types.CallToolResult(content=[], structured_content={"ok": True})


async def test_a_call_goes_out_for_its_caller_with_the_exchanged_token() -> None:
    upstream = FakeUpstream(answers(DONE), url=URL)
    issued = httpx.Response(200, json={"access_token": "crm-token-of-alice", "expires_in": 300})
    made = exchanger(issued)
    tool = McpTool(definition("crm.update"), upstream, "update", None, made)  # type: ignore[arg-type]
    alice_via_bot = context(
        tenant_id=TenantId("acme"),
        principal_id=PrincipalId("alice"),
        auth_method="oidc",
        actor=Actor(principal_id=PrincipalId("bot"), method="api_key"),
    )
    with caller_token("alice-token"):
        outcome = await ToolDispatcher([tool]).dispatch(of(alice_via_bot))
    assert outcome.boundary is EffectBoundary.EFFECT_COMPLETED
    [caller] = upstream.callers
    assert caller == Caller(("acme", "alice", "bot"), "crm-token-of-alice")
    assert "crm-token-of-alice" not in repr(caller)


@pytest.mark.parametrize(
    ("token", "idp", "reason", "retryable"),
    [
        (None, httpx.Response(200, json={"access_token": "t"}), "no token to exchange", False),
        (
            "alice-token",
            httpx.Response(400, json={"error": "invalid_target"}),
            "invalid_target",
            False,
        ),
        ("alice-token", httpx.Response(503), "503", True),
    ],
)
async def test_no_token_for_the_call_is_refused_before_anything_is_sent(
    token: str | None, idp: httpx.Response, reason: str, retryable: bool
) -> None:
    upstream = FakeUpstream(answers(DONE), url=URL)
    made = exchanger(idp)
    reader = McpTool(read_only("crm.read"), upstream, "read", None, made)  # type: ignore[arg-type]
    with caller_token(token):
        outcome = await ToolDispatcher([reader]).dispatch(invocation("crm.read"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "credential_exchange_failed"
    assert reason in outcome.failure.message
    assert outcome.failure.message.count("crm.read") == 1
    assert outcome.failure.retryable is retryable
    assert "alice-token" not in outcome.failure.message
    assert upstream.calls == []


async def test_a_server_with_auth_sends_no_call_without_its_callers_token() -> None:
    server = UpstreamServer(McpServerConfig.model_validate(entry(url="http://127.0.0.1:9/mcp")))
    with pytest.raises(UpstreamUnavailable, match="without its caller's token"):
        await server.call("update", {}, {})
    await server.aclose()


# -- the callers' sessions ------------------------------------------------------------


def test_past_the_bound_the_least_recently_used_idle_session_is_closed() -> None:
    closed: list[str] = []
    sessions = CallerSessions[str](2, closed.append)
    for person in ("alice", "bob"):
        slot = sessions.enter(("acme", person, None))
        slot.session = f"session of {person}"
        sessions.leave(slot)
    sessions.leave(sessions.enter(("acme", "alice", None)))  # alice used again: bob is older
    carol = sessions.enter(("acme", "carol", None))
    assert closed == ["session of bob"]
    assert len(sessions) == 2
    sessions.leave(carol)


def test_a_session_with_a_caller_in_it_is_never_closed_under_it() -> None:
    closed: list[str] = []
    sessions = CallerSessions[str](1, closed.append)
    alice = sessions.enter(("acme", "alice", None))
    alice.session = "session of alice"
    bob = sessions.enter(("acme", "bob", None))  # alice's call is in flight
    bob.session = "session of bob"
    assert closed == []
    assert len(sessions) == 2
    sessions.leave(alice)  # her call ended: now hers is the idle one past the bound
    assert closed == ["session of alice"]
    sessions.leave(bob)
    sessions.close()
    assert closed == ["session of alice", "session of bob"]
    assert len(sessions) == 0

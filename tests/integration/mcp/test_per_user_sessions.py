"""Per-user credentials for an upstream MCP server (issue 26), against the real OpenID
provider of tests/support/oidc and the SDK's own stateful server behind bearer
authentication (tests/support/upstream/people.py): each call goes on a session of its
caller's own, with the caller's token exchanged for the server's audience; a failed
exchange sends nothing."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import CallId, PrincipalId, TenantId
from arvis.domain.payload import freeze_payload
from arvis.tools import ToolDispatcher
from arvis.tools.base import ToolInvocation
from arvis.tools.credentials import caller_token
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import open_servers
from arvis.tools.mcp.upstream import UpstreamServer
from arvis.tools.outcome import DispatchOutcome
from tests.support.fakes import context
from tests.support.oidc import TOOL_AUDIENCE, OidcProvider, unverified_claims
from tests.support.server import running
from tests.support.upstream.people import PeopleUpstream, Seen

SECRET_ENV = "PEOPLE_EXCHANGE_SECRET"


@pytest.fixture
def upstream(oidc_provider: OidcProvider) -> Iterator[tuple[PeopleUpstream, str]]:
    people = PeopleUpstream(
        oidc_provider.issuer, oidc_provider.jwks(), TOOL_AUDIENCE, hidden=frozenset({"bob"})
    )
    with running(people) as url:
        yield people, f"{url}/mcp"


@pytest.fixture
def modern_upstream(oidc_provider: OidcProvider) -> Iterator[tuple[PeopleUpstream, str]]:
    people = PeopleUpstream(oidc_provider.issuer, oidc_provider.jwks(), TOOL_AUDIENCE, modern=True)
    with running(people) as url:
        yield people, f"{url}/mcp"


@dataclass
class Deployed:
    server: UpstreamServer
    dispatcher: ToolDispatcher
    idp: OidcProvider
    calls: int = 0

    async def call(self, person: str | None, tool: str = "write") -> DispatchOutcome:
        """``person``'s call (None: a caller with no token, as an API key's)."""
        self.calls += 1
        token = None if person is None else self.idp.user_token(person)
        invocation = ToolInvocation.create(
            tool=f"people.{tool}",
            payload=freeze_payload({}),
            context=context(
                tenant_id=TenantId("acme"),
                principal_id=PrincipalId(person or "agent-1"),
                auth_method="api_key" if person is None else "oidc",
            ),
            call_id=CallId(f"call-{self.calls}"),
        )
        with caller_token(token):
            return await self.dispatcher.dispatch(invocation)


@asynccontextmanager
async def deployed(
    idp: OidcProvider, url: str, *, endpoint: str | None = None, **fields: Any
) -> AsyncIterator[Deployed]:
    exchange = {
        "token_endpoint": endpoint or f"{idp.issuer}/token",
        "audience": fields.pop("audience", TOOL_AUDIENCE),
        "client_id": "arvis-exchange",
        "client_secret_env": SECRET_ENV,
        **fields.pop("exchange", {}),
    }
    config = McpServerConfig.model_validate(
        {
            "name": "people",
            "url": url,
            "trust_annotations": True,
            "timeout_s": 10,
            "startup_timeout_s": 10,
            "auth": {"token_exchange": exchange},
            **fields,
        }
    )
    environ = {SECRET_ENV: idp.client("arvis-exchange")["client_secret"]}
    async with httpx.AsyncClient() as http:
        [server], tools = await open_servers([config], environ, http=http)
        try:
            yield Deployed(server, ToolDispatcher(tools["people"]), idp)
        finally:
            await server.aclose()


def opened_by(upstream: PeopleUpstream) -> dict[str, Seen]:
    """Session id → the ``initialize`` that opened it."""
    return {seen.opened: seen for seen in list(upstream.seen) if seen.opened is not None}


def nothing_sent_for_a_caller(upstream: PeopleUpstream) -> bool:
    """Only the start-up listing reached the server: no call, no token, no caller's
    session (the listing session's own requests, its closing ones too, carry none)."""
    seen = list(upstream.seen)
    return (
        all(request.authorization is None for request in seen)
        and upstream.calls() == []
        and len(opened_by(upstream)) == 1
    )


async def test_a_persons_call_arrives_with_their_exchanged_token_on_a_session_of_their_own(
    oidc_provider: OidcProvider,
    upstream: tuple[PeopleUpstream, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    people, url = upstream
    async with deployed(oidc_provider, url) as arvis:
        listing = list(people.seen)
        outcome = await arvis.call("dave")
    assert outcome.boundary is EffectBoundary.EFFECT_COMPLETED, outcome
    assert outcome.result is not None
    assert outcome.result.value == {"done": "write", "for": "dave"}
    # The start-up listing was a service's: no Authorization at all.
    assert listing
    assert all(seen.authorization is None for seen in listing)
    [call] = people.calls()
    assert call.bearer is not None
    claims = unverified_claims(call.bearer)
    assert (claims["sub"], claims["aud"]) == ("dave", TOOL_AUDIENCE)
    assert claims["client_id"] == "arvis-exchange"  # exchanged, not the caller's own token
    sessions = opened_by(people)
    assert call.session in sessions
    assert sessions[call.session].person == "dave"
    logged = caplog.text + "\n".join(record.getMessage() for record in caplog.records)
    assert call.bearer not in logged
    assert call.bearer.split(".")[2] not in logged


async def test_two_people_get_sessions_and_tokens_of_their_own_and_a_cached_token_is_reused(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    async with deployed(oidc_provider, url) as arvis:
        outcomes = [await arvis.call(person) for person in ("dave", "alice", "dave")]
    assert [o.boundary for o in outcomes] == [EffectBoundary.EFFECT_COMPLETED] * 3
    dave, alice, dave_again = people.calls()
    assert (dave.person, alice.person, dave_again.person) == ("dave", "alice", "dave")
    assert dave.session != alice.session
    assert dave.bearer != alice.bearer
    # Dave's second call: his session and his cached token, no new exchange, no new session.
    assert dave_again.session == dave.session
    assert dave_again.bearer == dave.bearer
    initialized = [seen.person for seen in opened_by(people).values()]
    assert sorted(initialized, key=str) == sorted([None, "dave", "alice"], key=str)
    assert people.effects == [("write", "dave"), ("write", "alice"), ("write", "dave")]


async def test_over_the_sessionless_protocol_each_persons_call_carries_their_own_token(
    oidc_provider: OidcProvider, modern_upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = modern_upstream
    async with deployed(oidc_provider, url) as arvis:
        outcomes = [await arvis.call(person) for person in ("dave", "alice")]
    assert [o.boundary for o in outcomes] == [EffectBoundary.EFFECT_COMPLETED] * 2
    dave, alice = people.calls()
    assert (dave.session, alice.session) == (None, None)  # 2026-07-28 has no session ids
    assert dave.bearer is not None
    assert alice.bearer is not None
    assert unverified_claims(dave.bearer)["sub"] == "dave"
    assert unverified_claims(alice.bearer)["sub"] == "alice"
    assert people.effects == [("write", "dave"), ("write", "alice")]


async def test_a_refreshed_token_is_sent_on_the_persons_own_session(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    # A margin as long as the token's lifetime (300 s): every call exchanges anew.
    async with deployed(oidc_provider, url, exchange={"refresh_margin_s": 300}) as arvis:
        first = await arvis.call("dave")
        second = await arvis.call("dave")
    assert first.boundary is second.boundary is EffectBoundary.EFFECT_COMPLETED
    one, two = people.calls()
    assert one.bearer != two.bearer
    assert one.session == two.session
    assert [seen.person for seen in opened_by(people).values()].count("dave") == 1


async def test_past_the_bound_the_least_recently_used_idle_session_is_closed(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    async with deployed(oidc_provider, url, user_sessions=1) as arvis:
        await arvis.call("dave")
        await arvis.call("alice")
        again = await arvis.call("dave")
    assert again.boundary is EffectBoundary.EFFECT_COMPLETED
    dave, _, dave_again = people.calls()
    assert dave_again.session != dave.session  # his first session was closed for alice's
    assert [seen.person for seen in opened_by(people).values()].count("dave") == 2


async def test_a_persons_tool_list_that_differs_from_the_plan_is_not_sent(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    async with deployed(oidc_provider, url) as arvis:
        outcome = await arvis.call("bob")  # his session lists no "write"
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "upstream_changed"
    assert people.calls() == []
    assert people.effects == []


async def test_a_caller_with_no_token_to_exchange_sends_nothing(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    async with deployed(oidc_provider, url) as arvis:
        outcome = await arvis.call(None)
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "credential_exchange_failed"
    assert "no token to exchange" in outcome.failure.message
    assert nothing_sent_for_a_caller(people)


async def test_an_identity_provider_that_refuses_the_exchange_sends_nothing(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    async with deployed(oidc_provider, url, audience="urn:tool:nowhere") as arvis:
        outcome = await arvis.call("dave")
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "credential_exchange_failed"
    assert "invalid_target" in outcome.failure.message
    assert not outcome.failure.retryable
    assert nothing_sent_for_a_caller(people)


async def test_an_unreachable_identity_provider_is_not_started_and_retryable(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    people, url = upstream
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}/token"
        async with deployed(oidc_provider, url, endpoint=endpoint) as arvis:
            outcome = await arvis.call("dave", tool="read")
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "credential_exchange_failed"
    assert outcome.failure.retryable
    assert nothing_sent_for_a_caller(people)


def test_the_servers_session_is_its_openers_so_a_shared_session_would_be_refused(
    oidc_provider: OidcProvider, upstream: tuple[PeopleUpstream, str]
) -> None:
    # Why one session per caller: the SDK's server binds a session to who opened it.
    _, url = upstream

    def token_of(person: str) -> str:
        issued = oidc_provider.token_exchange(
            oidc_provider.user_token(person), audience=TOOL_AUDIENCE
        )
        return issued.access_token

    opening = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=10) as http:
        dave = {**accept, "Authorization": f"Bearer {token_of('dave')}"}
        opened = http.post(url, json=opening, headers=dave)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        alice = {**accept, **session, "Authorization": f"Bearer {token_of('alice')}"}
        assert http.post(url, json=listing, headers={**dave, **session}).status_code == 200
        assert http.post(url, json=listing, headers=alice).status_code == 404

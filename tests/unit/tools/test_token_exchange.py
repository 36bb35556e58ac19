"""Per-user credentials (issue 26): the caller's token is exchanged once per (principal,
actor, audience) until shortly before the exchanged token expires; without a caller's
token, or when the IdP refuses, there is no token and a reason that holds none."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ConfigurationError
from arvis.domain.identity import Actor
from arvis.tools.credentials import (
    ExchangeFailed,
    TokenExchangeConfig,
    TokenExchanger,
    ToolAuth,
    caller_token,
    token_exchanger,
)

CONFIG = TokenExchangeConfig(
    token_endpoint="https://idp.test/token",
    audience="urn:tool:crm",
    client_id="arvis",
    client_secret_env="SECRET",
)


def context(principal: str = "alice", actor: str | None = None) -> AuthorizedEffectContext:
    return AuthorizedEffectContext(
        tenant_id="acme",
        principal_id=principal,
        auth_method="oidc",
        run_id="r",
        causal_id="c",
        plan_id="p",
        instance_id="i",
        actor=None if actor is None else Actor(principal_id=actor, method="oidc"),
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def exchanger(answer: Any, status: int = 200) -> tuple[TokenExchanger, list[dict[str, str]], Clock]:
    forms: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        forms.append(dict(httpx.QueryParams(request.content.decode())))
        return httpx.Response(status, json=answer)

    clock = Clock()
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return TokenExchanger(CONFIG, "s3cret", http, monotonic=clock), forms, clock


async def test_the_callers_token_is_exchanged_for_the_tools_audience_and_cached() -> None:
    made, forms, clock = exchanger({"access_token": "tool-token", "expires_in": 300})
    with caller_token("alice-token"):
        assert await made.bearer_for(context()) == "tool-token"
        assert await made.bearer_for(context()) == "tool-token"
    assert len(forms) == 1
    assert forms[0]["subject_token"] == "alice-token"
    assert forms[0]["audience"] == "urn:tool:crm"
    assert forms[0]["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    # Another person, or another agent for the same person: a token of their own.
    with caller_token("bob-token"):
        await made.bearer_for(context("bob"))
    with caller_token("alice-via-bot"):
        await made.bearer_for(context("alice", actor="bot"))
    assert len(forms) == 3
    # Shortly before expiry (the margin), the token is exchanged anew.
    clock.now += 300 - CONFIG.refresh_margin_s
    with caller_token("alice-token"):
        await made.bearer_for(context())
    assert len(forms) == 4


async def test_without_a_callers_token_there_is_nothing_to_exchange() -> None:
    made, forms, _ = exchanger({"access_token": "t", "expires_in": 300})
    with pytest.raises(ExchangeFailed, match="no token to exchange"):
        await made.bearer_for(context())
    assert forms == []


async def test_a_refused_exchange_says_the_idps_code_and_never_a_token() -> None:
    answer = {"error": "invalid_target", "error_description": "alice-token is bad"}
    made, _, _ = exchanger(answer, status=400)
    with caller_token("alice-token"), pytest.raises(ExchangeFailed) as failed:
        await made.bearer_for(context())
    assert "invalid_target" in failed.value.reason
    assert "alice-token" not in failed.value.reason
    assert not failed.value.retryable


async def test_an_unreachable_idp_is_a_retryable_failure() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(down))
    made = TokenExchanger(CONFIG, "s3cret", http)
    with caller_token("alice-token"), pytest.raises(ExchangeFailed) as failed:
        await made.bearer_for(context())
    assert failed.value.retryable


def test_a_missing_client_secret_stops_start_up_naming_the_variable() -> None:
    http = httpx.AsyncClient()
    with pytest.raises(ConfigurationError, match="SECRET"):
        token_exchanger(ToolAuth(token_exchange=CONFIG), http, what="tool 'crm'", environ={})
    assert token_exchanger(None, http, what="x", environ={}) is None

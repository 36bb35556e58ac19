"""Console sign-in with an OpenID provider: authorization code with PKCE (``authlib``).

The sign-in's state, nonce and PKCE verifier travel in a short-lived cookie of their
own, signed with an HMAC: keyed by the console client's secret when it has one (so
every worker of a deployment accepts it), else by a key of this process. The callback
checks the cookie's signature, age and state, exchanges the code, and verifies the ID
token with the one verifier of :mod:`arvis.identity.tokens` (issuer, ``aud`` = the
console client, nonce, the issuer's algorithm allow-list); the principal, tenant,
roles and groups come from its claims as ``[[auth.oidc]]`` says. Only then is a
session started, exactly as a key's (:func:`arvis.console.sessions.start_session`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError
from fastapi import Request, Response

from arvis.console.sessions import COOKIE_PATH, is_https
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.identity.config import OidcIssuer
from arvis.identity.errors import IdentityProviderUnavailable, TokenClaimInvalid
from arvis.identity.tokens import JwtVerifier
from arvis.kernel import Kernel

FLOW_COOKIE = "arvis_console_oidc"
FLOW_PATH = COOKIE_PATH + "/oidc"
CALLBACK_PATH = FLOW_PATH + "/callback"
FLOW_TTL_S = 600
_CONTEXT = b"arvis-console-oidc-flow-v1"
_PROCESS_KEY = secrets.token_bytes(32)


class OidcSignInInvalid(ArvisError, code="oidc_state_invalid"):
    """The callback's state is not the sign-in this browser started (or it expired)."""


class OidcSignInDenied(ArvisError, code="oidc_denied"):
    """The provider answered the sign-in with an error (the person cancelled, …)."""


class OidcExchangeFailed(ArvisError, code="oidc_exchange_failed"):
    """The provider refused the authorization code, or answered no ID token."""


class OidcIssuerUnknown(ArvisError, code="oidc_issuer_unknown"):
    """No ``[[auth.oidc]]`` issuer with console settings has that number."""


@dataclass(frozen=True, slots=True)
class Provider:
    """An issuer the console offers "Sign in with", and its number on the page."""

    number: int
    issuer: OidcIssuer

    @property
    def name(self) -> str:
        return self.issuer.console_name or self.issuer.issuer


def providers(kernel: Kernel) -> list[Provider]:
    verifier = kernel.identities.tokens
    if verifier is None:
        return []
    return [
        Provider(number, issuer)
        for number, issuer in enumerate(verifier.issuers)
        if issuer.console_client_id is not None
    ]


def provider(kernel: Kernel, number: int) -> tuple[Provider, JwtVerifier]:
    verifier = kernel.identities.tokens
    for found in providers(kernel):
        if found.number == number and verifier is not None:
            return found, verifier
    raise OidcIssuerUnknown("no identity provider of the console has that number")


def _secret(issuer: OidcIssuer) -> str | None:
    name = issuer.console_client_secret_env
    return None if name is None else os.environ.get(name) or None


def _flow_key(issuer: OidcIssuer) -> bytes:
    secret = _secret(issuer)
    if secret is None:
        return _PROCESS_KEY
    return hmac.new(secret.encode(), _CONTEXT, hashlib.sha256).digest()


def _client(issuer: OidcIssuer, redirect_uri: str) -> AsyncOAuth2Client:
    assert issuer.console_client_id is not None
    secret = _secret(issuer)
    return AsyncOAuth2Client(
        client_id=issuer.console_client_id,
        client_secret=secret,
        token_endpoint_auth_method="client_secret_basic" if secret else "none",
        scope=issuer.console_scope,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=issuer.timeout_s,
    )


def callback_uri(request: Request) -> str:
    return str(request.base_url).rstrip("/") + CALLBACK_PATH


async def _endpoint(verifier: JwtVerifier, issuer: OidcIssuer, name: str) -> str | None:
    value = (await verifier.keys_of(issuer.issuer).discovery()).get(name)
    return value if isinstance(value, str) and value.startswith(("https://", "http://")) else None


async def start(
    kernel: Kernel, request: Request, number: int, next_page: str | None
) -> tuple[str, str]:
    """The provider's authorization URL for a new sign-in, and the flow cookie's value."""
    found, verifier = provider(kernel, number)
    endpoint = await _endpoint(verifier, found.issuer, "authorization_endpoint")
    if endpoint is None:
        raise IdentityProviderUnavailable(
            "the provider's discovery names no authorization endpoint"
        )
    flow = {
        "n": number,
        "state": secrets.token_urlsafe(32),
        "nonce": secrets.token_urlsafe(32),
        "verifier": secrets.token_urlsafe(48),
        "next": next_page or "",
        "exp": int(time.time()) + FLOW_TTL_S,
    }
    async with _client(found.issuer, callback_uri(request)) as client:
        url, _ = client.create_authorization_url(
            endpoint, state=flow["state"], nonce=flow["nonce"], code_verifier=flow["verifier"]
        )
    return url, _signed(found.issuer, flow)


def _signed(issuer: OidcIssuer, flow: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(flow, separators=(",", ":")).encode()).decode()
    mac = hmac.new(_flow_key(issuer), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def _flow(kernel: Kernel, cookie: str | None, state: str | None) -> tuple[Provider, dict[str, Any]]:
    """The flow the cookie carries, when it is ours, unexpired and of ``state``."""
    refused = OidcSignInInvalid("this sign-in was not started here or has expired; start again")
    if not cookie or not state or len(cookie) > 4096 or "." not in cookie:
        raise refused
    body, _, mac = cookie.rpartition(".")
    try:
        flow = json.loads(base64.urlsafe_b64decode(body.encode()))
        found, _ = provider(kernel, int(flow["n"]))
    except (ValueError, TypeError, KeyError, OidcIssuerUnknown):
        raise refused from None
    expected = hmac.new(_flow_key(found.issuer), body.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected) or int(flow["exp"]) < time.time():
        raise refused
    if not hmac.compare_digest(str(flow["state"]), state):
        raise refused
    return found, flow


async def finish(
    kernel: Kernel, request: Request, params: dict[str, str]
) -> tuple[Identity, str | None]:
    """The identity of a verified ID token for the callback's ``params``, and the page
    the sign-in asked for; each failure raises its own code, and no session exists yet."""
    found, flow = _flow(kernel, request.cookies.get(FLOW_COOKIE), params.get("state"))
    if "error" in params:
        reason = params.get("error_description") or params["error"]
        raise OidcSignInDenied(f"the identity provider did not sign you in: {reason[:200]}")
    code = params.get("code")
    if not code:
        raise OidcSignInInvalid("the identity provider answered no authorization code")
    _, verifier = provider(kernel, found.number)
    endpoint = await _endpoint(verifier, found.issuer, "token_endpoint")
    if endpoint is None:
        raise IdentityProviderUnavailable("the provider's discovery names no token endpoint")
    try:
        async with _client(found.issuer, callback_uri(request)) as client:
            token = await client.fetch_token(
                endpoint, code=code, code_verifier=flow["verifier"], grant_type="authorization_code"
            )
    except OAuthError as exc:
        raise OidcExchangeFailed(f"the identity provider refused the code ({exc.error})") from None
    except (httpx.HTTPError, ValueError):
        raise IdentityProviderUnavailable("the identity provider's token endpoint failed") from None
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise OidcExchangeFailed("the identity provider answered no ID token")
    verified = await verifier.verify_id_token(id_token, found.issuer, str(flow["nonce"]))
    identity = verifier.identity(verified)
    if identity.actor is not None:
        raise TokenClaimInvalid("an ID token names no actor")
    return identity, str(flow["next"]) or None


def set_flow_cookie(request: Request, response: Response, value: str) -> None:
    # Lax, not Strict: the provider's redirect back is a cross-site navigation.
    response.set_cookie(
        FLOW_COOKIE,
        value,
        max_age=FLOW_TTL_S,
        path=FLOW_PATH,
        secure=is_https(request),
        httponly=True,
        samesite="lax",
    )


async def end_session_url(kernel: Kernel, identity: Identity, after: str) -> str | None:
    """Where to send the browser to end the provider's session too (RP-initiated
    logout), when the person signed in through one that offers it."""
    verifier = kernel.identities.tokens
    if identity.method != "oidc" or identity.issuer is None or verifier is None:
        return None
    issuer = next((p.issuer for p in providers(kernel) if p.issuer.issuer == identity.issuer), None)
    if issuer is None or issuer.console_client_id is None:
        return None
    try:
        endpoint = await _endpoint(verifier, issuer, "end_session_endpoint")
    except IdentityProviderUnavailable:
        return None
    if endpoint is None:
        return None
    query = httpx.QueryParams(client_id=issuer.console_client_id, post_logout_redirect_uri=after)
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

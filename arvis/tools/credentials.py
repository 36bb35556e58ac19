"""Per-user credentials for remote tools: RFC 8693 token exchange at dispatch.

```toml
[[tools.http]]
name = "crm.update"
# ...
[tools.http.auth.token_exchange]     # i.e. auth = { token_exchange = { ... } }
token_endpoint = "https://idp.example.com/token"
audience = "crm"
client_id = "arvis"
client_secret_env = "ARVIS_CRM_EXCHANGE_SECRET"
```

The caller's token (the person's, when an agent acts for one) is exchanged at the IdP for
one scoped to the tool's audience, which the tool receives as its bearer. The caller's
token reaches dispatch out of band (:data:`CALLER_TOKEN`, set by the syscall handler for
the call's task), never in the invocation, so neither it nor the exchanged token can be
journaled, logged or traced with the call. A failed exchange happens before anything is
sent to the tool: not started, with the reason (never a token).

Exchanged tokens are cached per (tenant, principal, actor, audience) until shortly before
they expire: another agent acting for the same person gets a token of its own, since the
IdP names the actor in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ConfigurationError

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

CALLER_TOKEN: ContextVar[str | None] = ContextVar("arvis_caller_token", default=None)
"""The bearer token of the caller whose syscall is being handled (None: an API key, which
has nothing to exchange). Set only by :func:`caller_token`."""


@contextmanager
def caller_token(token: str | None) -> Iterator[None]:
    """Make ``token`` the current call's token to exchange, for the block's duration."""
    reset = CALLER_TOKEN.set(token)
    try:
        yield
    finally:
        CALLER_TOKEN.reset(reset)


class TokenExchangeConfig(BaseModel):
    """``auth.token_exchange`` of a remote tool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token_endpoint: str = Field(pattern=r"^https?://[^\s@#]+$")
    audience: str = Field(min_length=1)
    client_id: str = Field(min_length=1)
    client_secret_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable holding ARVIS's client secret at the IdP."""
    scope: str | None = None
    refresh_margin_s: float = Field(default=30.0, ge=0, le=3600)
    """An exchanged token is used until this long before its expiry."""
    timeout_s: float = Field(default=5.0, gt=0, le=60)


class ToolAuth(BaseModel):
    """``auth = {...}`` of a remote tool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token_exchange: TokenExchangeConfig


def one_authorization(auth: ToolAuth | None, headers_env: Collection[str]) -> None:
    """``auth`` sends the exchanged token as ``Authorization``: a remote tool's entry may
    not set that header too (two values of one header, whichever wins). Raises ValueError."""
    if auth is not None and "authorization" in {header.lower() for header in headers_env}:
        raise ValueError(
            "auth sends the exchanged token as Authorization: headers_env may not set it too"
        )


class ExchangeFailed(Exception):
    """No token for the tool: ``reason`` says why (never a token); ``retryable`` when
    the IdP could not be asked (a later attempt may succeed)."""

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


CallerKey = tuple[str, str, str | None]
"""(tenant, principal, actor): whose token a call is sent with."""


def caller_key(context: AuthorizedEffectContext) -> CallerKey:
    """The caller of a sealed context: the person, and the agent acting for them."""
    return (context.tenant_id, context.principal_id, context.actor_id)


CacheKey = tuple[CallerKey, str]


@dataclass
class TokenExchanger:
    """Exchanges the caller's token for one scoped to a tool's audience, cached."""

    config: TokenExchangeConfig
    client_secret: str = field(repr=False)
    http: httpx.AsyncClient
    monotonic: Callable[[], float] = time.monotonic
    exchanges: int = 0
    """How many exchanges were asked of the IdP (for tests and metrics)."""
    _cache: dict[CacheKey, tuple[str, float]] = field(default_factory=dict, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    async def bearer_for(self, context: AuthorizedEffectContext) -> str:
        """The tool's bearer token for the principal (and actor) of ``context``."""
        subject = CALLER_TOKEN.get()
        if subject is None:
            raise ExchangeFailed(
                "the caller presented no token to exchange (an API key has none); this tool"
                " needs a caller authenticated by the identity provider"
            )
        key: CacheKey = (caller_key(context), self.config.audience)
        async with self._lock:
            cached = self._cache.get(key)
            if cached is not None and self.monotonic() < cached[1]:
                return cached[0]
            token, lifetime = await self._exchange(subject)
            until = self.monotonic() + max(0.0, lifetime - self.config.refresh_margin_s)
            if lifetime > self.config.refresh_margin_s:
                self._cache[key] = (token, until)
            return token

    async def _exchange(self, subject: str) -> tuple[str, float]:
        form = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": subject,
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "audience": self.config.audience,
        }
        if self.config.scope:
            form["scope"] = self.config.scope
        self.exchanges += 1
        try:
            answer = await self.http.post(
                self.config.token_endpoint,
                data=form,
                auth=httpx.BasicAuth(self.config.client_id, self.client_secret),
                headers={"Accept": "application/json"},
                timeout=self.config.timeout_s,
                follow_redirects=False,
            )
            body = answer.json() if answer.content else {}
        except httpx.HTTPError:
            raise ExchangeFailed(
                "the token endpoint could not be reached", retryable=True
            ) from None
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if answer.status_code != 200:
            # RFC 6749 §5.2: the error code is the IdP's reason; its description may echo
            # input, so only the code is kept.
            error = body.get("error")
            said = error if isinstance(error, str) and error.isascii() else "no error code"
            raise ExchangeFailed(
                f"the identity provider refused the exchange ({answer.status_code} {said[:64]})",
                retryable=answer.status_code >= 500,
            )
        token, lifetime = body.get("access_token"), body.get("expires_in")
        if not isinstance(token, str) or not token:
            raise ExchangeFailed("the identity provider answered no access_token")
        return token, float(lifetime) if isinstance(lifetime, int | float) else 0.0


def token_exchanger(
    auth: ToolAuth | None, http: httpx.AsyncClient, *, what: str, environ: Mapping[str, str]
) -> TokenExchanger | None:
    """The exchanger of a tool's ``auth``; its client secret unset stops start-up naming
    ``what`` and the variable (never a value)."""
    if auth is None:
        return None
    config = auth.token_exchange
    secret = environ.get(config.client_secret_env, "")
    if not secret:
        raise ConfigurationError(
            f"{what}: auth.token_exchange.client_secret_env {config.client_secret_env} is not set"
        )
    return TokenExchanger(config, secret, http)

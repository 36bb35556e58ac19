"""``[auth]`` of ``arvis.toml``: the OpenID Connect issuers whose JWTs are bearer
credentials beside API keys (docs/identity.md).

```toml
[[auth.oidc]]
issuer = "https://idp.example.com/realms/acme"   # exact match of iss
audience = "arvis"                                # required in aud
tenant = "acme"                                   # or tenant_claim = "tenant"
principal_claim = "sub"
roles_claim = "arvis_roles"
groups_claim = "groups"
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arvis.domain.sections import parse_section

Algorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
    "Ed25519",
]  # fmt: skip
"""Asymmetric signature algorithms only: ``none`` and the HMAC family (whose key would be
the issuer's public key, RFC 8725 §2.1) can never be allowed."""

DEFAULT_ALGORITHMS: tuple[Algorithm, ...] = ("RS256", "ES256", "EdDSA")


class OidcIssuer(BaseModel):
    """One trusted issuer: which tokens of it are ARVIS's, and how they name a principal."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: str = Field(min_length=1)
    """Compared exactly with ``iss``; discovery is at
    ``{issuer}/.well-known/openid-configuration``."""
    audience: str = Field(min_length=1)
    """Must be one of the token's ``aud``."""
    tenant: str | None = Field(default=None, min_length=1)
    """Every principal of this issuer belongs to this tenant; or ``tenant_claim``."""
    tenant_claim: str | None = Field(default=None, min_length=1)
    principal_claim: str = "sub"
    roles_claim: str = "arvis_roles"
    """A list of roles (agent, approver, auditor, admin); a token naming none is refused."""
    groups_claim: str | None = "groups"
    """Approver groups (``[policy] approvals``); None: the issuer's principals have none."""
    algorithms: tuple[Algorithm, ...] = DEFAULT_ALGORITHMS
    leeway_s: int = Field(default=30, ge=0, le=300)
    """Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
    jwks_min_refresh_s: float = Field(default=10.0, ge=0, le=3600)
    """A token with an unknown ``kid`` refetches the keys at most this often."""
    jwks_ttl_s: float = Field(default=3600.0, gt=0, le=86400)
    """Keys older than this are refetched on the next token."""
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    console_client_id: str | None = Field(default=None, min_length=1)
    """The console's client at this issuer: set, the sign-in page offers "Sign in with"
    it (authorization code + PKCE); its ID tokens must have this ``aud``."""
    console_client_secret_env: str | None = Field(default=None, min_length=1)
    """The environment variable holding that client's secret (None: a public client)."""
    console_name: str | None = Field(default=None, min_length=1, max_length=80)
    """The button's name for the issuer (default: the issuer's URL)."""
    console_scope: str = "openid profile email arvis"

    @model_validator(mode="after")
    def _one_tenant_source(self) -> OidcIssuer:
        if (self.tenant is None) == (self.tenant_claim is None):
            raise ValueError("set exactly one of tenant and tenant_claim")
        if not self.algorithms:
            raise ValueError("algorithms must name at least one algorithm")
        if self.console_client_secret_env is not None and self.console_client_id is None:
            raise ValueError("console_client_secret_env needs console_client_id")
        return self

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"


class AuthConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    oidc: tuple[OidcIssuer, ...] = ()

    @model_validator(mode="after")
    def _issuers_are_distinct(self) -> AuthConfig:
        issuers = [entry.issuer for entry in self.oidc]
        if len(set(issuers)) != len(issuers):
            raise ValueError("each issuer may be declared once")
        return self


def parse_auth_config(raw: Mapping[str, Any]) -> AuthConfig:
    """``[auth]``, validated; a bad entry stops start-up with one line naming it."""
    return parse_section(AuthConfig, raw, "[auth]")

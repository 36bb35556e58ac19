"""IDENTITIES: one row per kind of bearer credential a principal may hold, so every rule
of the suite runs with each (issue 26).

- ``api_key``: the keys the deployment minted (``arvis_<key id>_<secret>``).
- ``jwt``: access tokens of the package's OpenID provider (tests/support/oidc), one machine
  client per principal whose tokens carry its tenant, roles and groups, trusted by the
  deployment's ``[[auth.oidc]]``. A second credential of the same principal (``acme:agent-alt``)
  is a second token of the same client.

A row turns the deployment's principals (``who`` → tenant, principal, roles, groups) into
the tokens its drivers send. Adding a kind of credential is one more row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from arvis.domain.identity import ROLES
from tests.support.adversarial.deployment import EXTRA_KEYS, Deployment, KeySpec
from tests.support.http import TENANTS
from tests.support.identity import trust
from tests.support.oidc import ARVIS_RESOURCE, ARVIS_SCOPE, OidcProvider

TOKEN_TTL_S = 24 * 3600
"""The package's tokens outlive the suite (the provider's default is ten minutes)."""


def principals() -> dict[str, KeySpec]:
    """Every principal the deployment's cells name: one per (tenant, role), and the extras."""
    base: dict[str, KeySpec] = {
        f"{tenant}:{role}": (tenant, f"{role}-of-{tenant}", (role,), ())
        for tenant in TENANTS
        for role in ROLES
    }
    return {**base, **EXTRA_KEYS}


def jwt_tokens(idp: OidcProvider, keys: Mapping[str, str]) -> dict[str, str]:
    """A JWT of each principal ``keys`` names (its machine client created first)."""
    idp.put_resource(ARVIS_RESOURCE["RS256"], audience="arvis", scope=ARVIS_SCOPE, ttl=TOKEN_TTL_S)
    specs = principals()
    tokens: dict[str, str] = {}
    for who in keys:
        tenant, principal, roles, groups = specs[who]
        claims = {"tenant": tenant, "arvis_roles": list(roles), "groups": list(groups)}
        tokens[who] = idp.agent_token(principal, claims=claims)
    return tokens


@dataclass(frozen=True)
class IdentityKind:
    name: str
    tokens: Callable[[OidcProvider, Mapping[str, str]], dict[str, str]]
    """The credentials of the deployment's principals, from its minted keys."""

    def __repr__(self) -> str:
        return f"IdentityKind({self.name})"


IDENTITIES: tuple[IdentityKind, ...] = (
    IdentityKind("api_key", lambda _, keys: dict(keys)),
    IdentityKind("jwt", jwt_tokens),
)
"""Every kind of bearer credential. Add a row to hold it to every rule of the suite."""


@dataclass(frozen=True)
class Credentials:
    """One row of IDENTITIES, applied to deployments: the ``arvis.toml`` trusts the
    package's provider, and the deployment's principals present the row's credentials."""

    kind: IdentityKind
    idp: OidcProvider

    def trusted(self, config: str) -> str:
        """``config`` with the ``[[auth.oidc]]`` entry of the package's provider."""
        return config + trust(self.idp.issuer)

    def held_by(self, deployment: Deployment) -> Deployment:
        """``deployment`` whose drivers present this kind's credentials."""
        tokens = self.kind.tokens(self.idp, deployment.tokens)
        served = dataclasses.replace(deployment.served, tokens=tokens)
        return dataclasses.replace(deployment, tokens=tokens, served=served)

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
from tests.support.identity import CONSOLE_SECRET_ENV, trust
from tests.support.oidc import ARVIS_RESOURCE, ARVIS_SCOPE, OidcProvider

CONSOLE_CLIENT = "arvis-console"
"""The provider's client for the console's sign-in (tests/support/oidc)."""
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


People = dict[str, tuple[str, str]]
"""``who`` → the username and password of a person at the identity provider."""


def console_people(idp: OidcProvider, keys: Mapping[str, str]) -> People:
    """The person of each principal ``keys`` names, who signs in to the console at ``idp``
    (its ID tokens carry the same tenant, roles and groups as the machine's tokens): ``who``
    → username and password."""
    specs = principals()
    people: People = {}
    for who in keys:
        tenant, principal, roles, groups = specs[who]
        claims = {"tenant": tenant, "arvis_roles": list(roles), "groups": list(groups)}
        password = idp.put_user(principal, claims)["password"]
        people[who] = (principal, password)
    return people


@dataclass(frozen=True)
class IdentityKind:
    name: str
    tokens: Callable[[OidcProvider, Mapping[str, str]], dict[str, str]]
    """The credentials of the deployment's principals, from its minted keys."""
    people: Callable[[OidcProvider, Mapping[str, str]], People] = lambda _, __: {}
    """Who signs in to the console at the identity provider, and how (else with a key)."""

    def __repr__(self) -> str:
        return f"IdentityKind({self.name})"


IDENTITIES: tuple[IdentityKind, ...] = (
    IdentityKind("api_key", lambda _, keys: dict(keys)),
    IdentityKind("jwt", jwt_tokens, console_people),
)
"""Every kind of bearer credential. Add a row to hold it to every rule of the suite."""


@dataclass(frozen=True)
class Credentials:
    """One row of IDENTITIES, applied to deployments: the ``arvis.toml`` trusts the
    package's provider (for bearer tokens and the console's sign-in), and the deployment's
    principals present the row's credentials."""

    kind: IdentityKind
    idp: OidcProvider

    @property
    def console_secret(self) -> str:
        """The console client's secret, which ``[[auth.oidc]]`` reads from
        :data:`CONSOLE_SECRET_ENV` (the fixture sets it for the in-process app)."""
        return str(self.idp.client(CONSOLE_CLIENT)["client_secret"])

    def trusted(self, config: str) -> str:
        """``config`` with the ``[[auth.oidc]]`` entry of the package's provider."""
        return config + trust(
            self.idp.issuer,
            console_client_id=CONSOLE_CLIENT,
            console_client_secret_env=CONSOLE_SECRET_ENV,
            console_name="the test provider",
        )

    def held_by(self, deployment: Deployment) -> Deployment:
        """``deployment`` whose drivers present this kind's credentials."""
        tokens = self.kind.tokens(self.idp, deployment.tokens)
        people = self.kind.people(self.idp, deployment.tokens)
        base = deployment.url
        self.idp.add_console_redirects(
            [f"{base}/console/oidc/callback"], [f"{base}/console/sign-in"]
        )
        served = dataclasses.replace(deployment.served, tokens=tokens)
        environment = {**deployment.environment, CONSOLE_SECRET_ENV: self.console_secret}
        return dataclasses.replace(
            deployment, tokens=tokens, served=served, people=people, environment=environment
        )

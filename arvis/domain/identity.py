"""Who is calling: the trusted identity an adapter established for a request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from arvis.domain.ids import PrincipalId, TenantId

AuthMethod = Literal["api_key", "oidc", "development", "anonymous", "slack"]
Role = Literal["agent", "approver", "auditor", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)
"""Every role, in the order they are listed and offered."""


class Actor(BaseModel):
    """The agent acting for a person (RFC 8693 ``act``, or an agent's API key presenting
    the person's token): who actually called, when the principal is someone else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    principal_id: PrincipalId = Field(min_length=1)
    method: AuthMethod
    key_id: str | None = None
    """The agent's API key id, when it authenticated with one."""

    def describe(self) -> str:
        return named(self.principal_id, self.key_id)


def named(principal_id: str, key_id: str | None = None) -> str:
    """A principal as a person reads it: its id, and the API key it used when it used one."""
    return principal_id if key_id is None else f"{principal_id} (key {key_id})"


def acting_for(principal: str, actors: str | Sequence[str] | None) -> str:
    """Who made a call, as every listing says it (issue 26; Slack's messages too): ``agent
    <agent> for <person>`` when an agent acted for the principal (``agents a, b for …``
    when several did, as a run may have), else the principal alone."""
    agents = [actors] if isinstance(actors, str) else list(actors or ())
    if not agents:
        return principal
    return f"agent{'s' if len(agents) > 1 else ''} {', '.join(agents)} for {principal}"


class Identity(BaseModel):
    """A principal of one tenant, how it authenticated, and its roles.

    Built by an adapter (the HTTP layer from an API key, the CLI for an operator),
    never from anything the caller claims about itself.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: TenantId = Field(min_length=1)
    principal_id: PrincipalId = Field(min_length=1)
    method: AuthMethod
    key_id: str | None = None
    """The API key's public id (for ``slack``, the Slack user id); never a secret."""
    roles: tuple[Role, ...] = ()
    groups: tuple[str, ...] = ()
    """Approver groups of the key (``arvis keys create --group``) or the token's claim."""
    issuer: str | None = None
    """The OpenID Connect issuer of a JWT principal (``method == "oidc"``)."""
    actor: Actor | None = None
    """The agent acting for this principal (a person), when one is; None: the principal
    called itself."""
    subject_token: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """The principal's own bearer token (a JWT), which a tool with per-user credentials
    exchanges at dispatch; never serialised, never shown, never sealed or journaled."""

    def has_role(self, role: Role) -> bool:
        return role in self.roles or "admin" in self.roles

    def in_any_group(self, groups: tuple[str, ...]) -> bool:
        """True when ``groups`` is empty (no group is required) or names one of ours."""
        return not groups or any(group in self.groups for group in groups)

    @property
    def actor_id(self) -> PrincipalId | None:
        return None if self.actor is None else self.actor.principal_id

    def took_part(self, tenant_id: str, principal_id: str, actor_id: str | None) -> bool:
        """True when this identity is the principal of a sealed context or the agent that
        acted for it: four eyes counts both, so an approver may be neither."""
        return self.tenant_id == tenant_id and self.principal_id in (principal_id, actor_id)

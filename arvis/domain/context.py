"""The sealed snapshot a tool body sees of who asked and where it runs (DESIGN §1)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.identity import Actor
from arvis.domain.ids import CausalId, InstanceId, PlanId, PrincipalId, RunId, TenantId


def _absent(value: object) -> bool:
    # Fields added after the context's first version are left out of its text when
    # unset, so a context of the earlier shape keeps its exact bytes (entries hash it).
    return value is None


class AuthorizedEffectContext(BaseModel):
    """Principal, tenant, authentication provenance and runtime bindings of one effect.

    Sealed at admission and stored with the intent; a confirmation that resumes
    it is compared with the caller's current identity, never trusted blindly.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: TenantId = Field(min_length=1)
    principal_id: PrincipalId = Field(min_length=1)
    auth_method: str = Field(min_length=1)
    """How the principal authenticated, e.g. ``api_key``."""
    key_id: str | None = None
    """The API key's id when ``auth_method`` is a key; never the secret."""
    roles: tuple[str, ...] = ()
    run_id: RunId = Field(min_length=1)
    causal_id: CausalId = Field(min_length=1)
    plan_id: PlanId = Field(min_length=1)
    """The tool plan the run is bound to."""
    instance_id: InstanceId = Field(min_length=1)
    """The ARVIS instance that admitted the effect."""
    issuer: str | None = Field(default=None, exclude_if=_absent)
    """The OpenID Connect issuer of a JWT principal (``auth_method`` ``oidc``)."""
    actor: Actor | None = Field(default=None, exclude_if=_absent)
    """The agent that acted for the principal (a person), when one did: both are sealed,
    policy sees both, and consent is bound to both (DESIGN §7)."""

    @property
    def actor_id(self) -> PrincipalId | None:
        return None if self.actor is None else self.actor.principal_id

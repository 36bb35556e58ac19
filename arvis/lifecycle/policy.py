"""ToolPolicy (DESIGN §2) and the default rule policy configured in ``arvis.toml``.

```toml
[policy]
version = "2026-11-30"            # shown in every authorization snapshot

[policy.default]                   # every tenant without a section of its own
deny_tools = ["files.append"]      # never run these
allow_capabilities = []            # lift the process.execute / environment.write gates
egress_hosts = ["api.example.com", "*.example.org"]
consent_tools = ["files.write"]    # consent beyond the default rule
no_consent_tools = []              # exempt from the default rule

[policy.tenants.acme]              # replaces [policy.default] for tenant acme
allow_tools = ["echo", "files.read"]
```

Default, with no ``[policy]``: every tool may run, ``process.execute`` and
``environment.write`` tools are refused, ``network.access`` tools may reach no
host, and every ``mutating`` + ``unsafe`` tool needs consent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arvis.domain.authorization import DenialReason, PolicyDecision
from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.errors import ConfigurationError
from arvis.domain.payload import FrozenEffectPayload

GATED_CAPABILITIES = ("process.execute", "environment.write")


class ToolPolicy(Protocol):
    """Decides whether one sealed, schema-valid invocation may run, and on what terms."""

    def evaluate(
        self,
        context: AuthorizedEffectContext,
        definition: ToolDefinition,
        payload: FrozenEffectPayload,
    ) -> PolicyDecision: ...


class TenantRules(BaseModel):
    """Rules for one tenant (or the default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_tools: list[str] | None = None
    """When set, only these tools may run."""
    deny_tools: list[str] = Field(default_factory=list)
    allow_capabilities: list[str] = Field(default_factory=list)
    """Gated capabilities (process.execute, environment.write) this tenant may use."""
    egress_hosts: list[str] = Field(default_factory=list)
    """Hosts network.access tools may reach; ``*.example.org`` matches subdomains."""
    consent_tools: list[str] = Field(default_factory=list)
    no_consent_tools: list[str] = Field(default_factory=list)
    consent_for_mutating_unsafe: bool = True


class PolicyConfig(BaseModel):
    """The ``[policy]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = "default"
    default: TenantRules = Field(default_factory=TenantRules)
    tenants: dict[str, TenantRules] = Field(default_factory=dict)


class ConfirmationsConfig(BaseModel):
    """The ``[confirmations]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttl_s: float = Field(default=24 * 3600, gt=0, le=365 * 24 * 3600)
    """A confirmation expires this long after it was requested."""
    allow_self_approval: bool = False
    """Let a principal approve its own request. Off: four eyes (DESIGN §4)."""


def parse_confirmations_config(raw: Mapping[str, Any]) -> ConfirmationsConfig:
    try:
        return ConfirmationsConfig.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigurationError(f"[confirmations] {where}: {first['msg']}") from None


def parse_policy_config(raw: Mapping[str, Any]) -> PolicyConfig:
    try:
        return PolicyConfig.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigurationError(f"[policy] {where}: {first['msg']}") from None


class RulePolicy:
    """The default :class:`ToolPolicy`: allow/deny lists, capability and egress
    gates, and consent rules, per tenant."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()
        self.version = self.config.version
        self.digest = sha256_hex(canonical_bytes(self.config.model_dump(mode="json")))

    def _rules(self, tenant_id: str) -> TenantRules:
        return self.config.tenants.get(tenant_id, self.config.default)

    def evaluate(
        self,
        context: AuthorizedEffectContext,
        definition: ToolDefinition,
        payload: FrozenEffectPayload,
    ) -> PolicyDecision:
        rules = self._rules(context.tenant_id)
        name = definition.name
        if name in rules.deny_tools:
            return self._deny(DenialReason.POLICY_DENIED, f"tool {name!r} is denied by policy")
        if rules.allow_tools is not None and name not in rules.allow_tools:
            return self._deny(
                DenialReason.POLICY_DENIED, f"tool {name!r} is not on this tenant's allow list"
            )
        for gated in GATED_CAPABILITIES:
            if gated in definition.capabilities and gated not in rules.allow_capabilities:
                return self._deny(
                    DenialReason.CAPABILITY_DENIED,
                    f"tool {name!r} needs capability {gated!r}, which policy does not allow",
                )
        if "network.access" in definition.capabilities:
            host = _destination_host(payload.value)
            if host is None or not _host_allowed(host, rules.egress_hosts):
                shown = host or "an undeclared host"
                return self._deny(
                    DenialReason.EGRESS_DENIED, f"egress to {shown} is not on the allow list"
                )
        return PolicyDecision(
            allowed=True,
            consent_required=_needs_consent(definition, rules),
            policy_version=self.version,
            policy_digest=self.digest,
        )

    def _deny(self, reason: DenialReason, detail: str) -> PolicyDecision:
        return PolicyDecision(
            allowed=False,
            reason=reason,
            detail=detail,
            policy_version=self.version,
            policy_digest=self.digest,
        )


def _needs_consent(definition: ToolDefinition, rules: TenantRules) -> bool:
    if definition.name in rules.no_consent_tools:
        return False
    if definition.name in rules.consent_tools:
        return True
    return (
        rules.consent_for_mutating_unsafe
        and definition.effect is Effect.MUTATING
        and definition.replay_safety is ReplaySafety.UNSAFE
    )


def _destination_host(payload: Any) -> str | None:
    """The host a network tool's payload names in its ``url`` field, if any."""
    if not isinstance(payload, dict):
        return None
    url = payload.get("url")
    if not isinstance(url, str):
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower() if host else None


def _host_allowed(host: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*" or pattern == host:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False

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

[policy.tenants.acme.approvals."payments.send"]   # consent terms for one tool
approvers = ["payments-leads"]     # approver groups (arvis keys create --group)
quorum = 2                         # distinct approvals; a deny by any approver denies
ttl_s = 3600                       # the confirmation expires after this
```

A tool with approval terms always needs consent (unless on ``no_consent_tools``).

Default, with no ``[policy]``: every tool may run, ``process.execute`` and
``environment.write`` tools are refused, network tools may reach no host, and
every ``mutating`` + ``unsafe`` tool needs consent.

The egress gate checks the host a call will really reach. A tool with a fixed
destination (a declared HTTP tool's ``url``, as exposed by the dispatcher that
will run it) is checked by that host, read-only or not; any other tool holding
``network.access`` is checked by the host of its payload's ``url``. Hosts are
compared exactly after normalisation (:mod:`arvis.domain.egress`); a URL whose host
cannot be read unambiguously is refused.

``engine = "cedar"`` hands the decision to Cedar policies (:mod:`arvis.lifecycle.policy.cedar`);
the capability and egress gates of the tenant's rules (:meth:`RulePolicy.gate`) stay in
force underneath it. ``mode = "shadow"`` keeps enforcing these rules and evaluates Cedar
beside them (:mod:`arvis.lifecycle.policy.shadow`). See docs/policy.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from arvis.domain.authorization import (
    GROUP_PATTERN,
    ApprovalTerms,
    DenialReason,
    PolicyDecision,
)
from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.egress import (
    egress_host,
    host_allowed,
    normalise_pattern,
    normalised_patterns,
)
from arvis.domain.payload import FrozenEffectPayload
from arvis.domain.sections import parse_section

GATED_CAPABILITIES = ("process.execute", "environment.write")


@dataclass(frozen=True, slots=True)
class PolicyQuery:
    """What a policy decides on: one sealed, schema-valid call, its payload in the form
    the tool acts on (DESIGN §10)."""

    context: AuthorizedEffectContext
    definition: ToolDefinition
    payload: FrozenEffectPayload
    destination: str | None
    """The URL the tool reaches whatever its payload says (``ToolPlan.destination``), or
    None when the tool has no fixed one."""
    attempt: int = 1
    """The attempt number the call would take (a policy may read it; the rules do not)."""
    now: datetime | None = None
    """The time admission decides at (likewise)."""


class ToolPolicy(Protocol):
    """Decides whether one sealed, schema-valid invocation may run, and on what terms."""

    def evaluate(self, query: PolicyQuery) -> PolicyDecision:
        """Decide one call."""
        ...


class TenantRules(BaseModel):
    """Rules for one tenant (or the default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow_tools: list[str] | None = None
    """When set, only these tools may run."""
    deny_tools: list[str] = Field(default_factory=list)
    allow_capabilities: list[str] = Field(default_factory=list)
    """Gated capabilities (process.execute, environment.write) this tenant may use."""
    egress_hosts: list[str] = Field(default_factory=list)
    """Hosts network tools may reach; ``*.example.org`` matches subdomains, ``*`` any host.

    Host names only: no scheme, port, path or userinfo; any port of an allowed host is allowed.
    """
    consent_tools: list[str] = Field(default_factory=list)
    no_consent_tools: list[str] = Field(default_factory=list)
    consent_for_mutating_unsafe: bool = True
    approvals: dict[str, ApprovalTerms] = Field(default_factory=dict)
    """Tool name → who may approve it, how many must, and the confirmation's ttl."""

    @field_validator("approvals")
    @classmethod
    def _groups(cls, approvals: dict[str, ApprovalTerms]) -> dict[str, ApprovalTerms]:
        for tool, terms in approvals.items():
            for group in terms.approvers:
                if not re.fullmatch(GROUP_PATTERN, group):
                    raise ValueError(f"tool {tool!r}: {group!r} is not an approver group name")
        return approvals

    @field_validator("egress_hosts")
    @classmethod
    def _hosts(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if normalise_pattern(pattern) is None:
                raise ValueError(
                    f"{pattern!r} is not a host name, an IP address, '*.domain' or '*' "
                    "(no scheme, port, path or userinfo)"
                )
        return patterns


# What Cedar decides under engine = "cedar": setting one of these beside it would
# read as if it applied, and it would not (the gates' fields still do).
_DECIDED_BY_CEDAR = (
    "allow_tools",
    "deny_tools",
    "consent_tools",
    "no_consent_tools",
    "consent_for_mutating_unsafe",
)


class PolicyConfig(BaseModel):
    """The ``[policy]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = "default"
    engine: Literal["rules", "cedar"] = "rules"
    """``rules``: this section's lists decide. ``cedar``: the Cedar files of ``policies``."""
    mode: Literal["enforce", "shadow"] = "enforce"
    """``shadow`` (with ``engine = "cedar"``): the rules decide, Cedar is evaluated beside
    them, and every disagreement is logged and counted."""
    policies: str | None = None
    """A glob of Cedar files, relative to the directory of ``arvis.toml``."""
    default: TenantRules = Field(default_factory=TenantRules)
    tenants: dict[str, TenantRules] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _engine_settings(self) -> PolicyConfig:
        if self.engine == "rules":
            if self.mode == "shadow":
                raise ValueError(
                    'mode = "shadow" evaluates Cedar beside the rules: set engine = "cedar"'
                )
            if self.policies is not None:
                raise ValueError('policies names Cedar files: set engine = "cedar"')
            return self
        if not self.policies:
            raise ValueError('engine = "cedar" needs policies = "<glob of .cedar files>"')
        if self.mode == "enforce":
            for scope, rules in (("default", self.default), *self.tenants.items()):
                decided = sorted(set(_DECIDED_BY_CEDAR) & rules.model_fields_set)
                if decided:
                    where = "default" if scope == "default" else f"tenants.{scope}"
                    raise ValueError(
                        f"[policy.{where}] {', '.join(decided)}: Cedar decides this under "
                        'engine = "cedar"; write it as a permit or forbid (only '
                        "allow_capabilities and egress_hosts, the gates, apply)"
                    )
        return self


class ConfirmationsConfig(BaseModel):
    """The ``[confirmations]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ttl_s: float = Field(default=24 * 3600, gt=0, le=365 * 24 * 3600)
    """A confirmation expires this long after it was requested."""
    allow_self_approval: bool = False
    """Let a principal approve its own request. Off: four eyes (DESIGN §4)."""


def parse_confirmations_config(raw: Mapping[str, Any]) -> ConfirmationsConfig:
    return parse_section(ConfirmationsConfig, raw, "[confirmations]")


def parse_policy_config(raw: Mapping[str, Any]) -> PolicyConfig:
    return parse_section(PolicyConfig, raw, "[policy]")


class RulePolicy:
    """The default :class:`ToolPolicy`: allow/deny lists, capability and egress
    gates, and consent rules, per tenant."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()
        self.version = self.config.version
        # The rules' own fields only: which engine runs beside them is not a rule, and
        # a deployment that names no engine keeps the digest it always had.
        dumped = self.config.model_dump(mode="json", exclude={"engine", "mode", "policies"})
        # Likewise rules added later (approvals, revision 0006) count only when set, so
        # an upgrade does not make every approval asked before it stale.
        for rules in (dumped["default"], *dumped["tenants"].values()):
            if not rules.get("approvals"):
                rules.pop("approvals", None)
        self.digest = sha256_hex(canonical_bytes(dumped))
        # The config keeps the operator's spelling (it is what the digest covers);
        # matching uses the normalised form, computed once.
        self._default_egress = normalised_patterns(self.config.default.egress_hosts)
        self._tenant_egress = {
            tenant: normalised_patterns(rules.egress_hosts)
            for tenant, rules in self.config.tenants.items()
        }

    def _rules(self, tenant_id: str) -> TenantRules:
        return self.config.tenants.get(tenant_id, self.config.default)

    def _scope(self, tenant_id: str) -> str:
        return f"tenants.{tenant_id}" if tenant_id in self.config.tenants else "default"

    def evaluate(self, query: PolicyQuery) -> PolicyDecision:
        rules = self._rules(query.context.tenant_id)
        scope = self._scope(query.context.tenant_id)
        definition = query.definition
        name = definition.name
        if name in rules.deny_tools:
            return self._deny(
                DenialReason.POLICY_DENIED,
                f"tool {name!r} is denied by policy",
                f"{scope}.deny_tools",
            )
        if rules.allow_tools is not None and name not in rules.allow_tools:
            return self._deny(
                DenialReason.POLICY_DENIED,
                f"tool {name!r} is not on this tenant's allow list",
                f"{scope}.allow_tools",
            )
        denial = self.gate(query)
        if denial is not None:
            return denial
        consent = _consent_rule(definition, rules)
        required = consent is not None and consent[1]
        return PolicyDecision(
            allowed=True,
            detail=_CONSENT_REASONS[consent[0]].format(name) if consent and required else "",
            consent_required=required,
            approval=rules.approvals.get(name) if required else None,
            policy_version=self.version,
            policy_digest=self.digest,
            policy_ids=tuple(
                f"{scope}.{rule}"
                for rule in (
                    "allow_tools" if rules.allow_tools is not None else None,
                    None if consent is None else consent[0],
                )
                if rule is not None
            ),
        )

    def approval_terms(self, tenant_id: str, tool: str) -> ApprovalTerms | None:
        """Who may approve ``tool`` for ``tenant_id``, how many must, and the ttl."""
        return self._rules(tenant_id).approvals.get(tool)

    def gate(self, query: PolicyQuery) -> PolicyDecision | None:
        """The built-in capability and egress gates: their refusal, or None.

        They hold whichever engine decides the rest (docs/policy.md).
        """
        context, definition, destination = query.context, query.definition, query.destination
        rules = self._rules(context.tenant_id)
        name = definition.name
        for gated in GATED_CAPABILITIES:
            if gated in definition.capabilities and gated not in rules.allow_capabilities:
                return self._deny(
                    DenialReason.CAPABILITY_DENIED,
                    f"tool {name!r} needs capability {gated!r}, which policy does not allow",
                    CAPABILITY_GATE,
                )
        # A fixed destination is where the call goes, network.access or not: a
        # payload `url` sent to that endpoint is data, not a second destination.
        if destination is not None:
            return self._egress(context.tenant_id, destination, f"tool {name!r}'s endpoint")
        if "network.access" in definition.capabilities:
            url = payload_url(query.payload)
            if url is None:
                return self._deny(
                    DenialReason.EGRESS_DENIED,
                    f"tool {name!r} needs network access and its payload names no url",
                    EGRESS_GATE,
                )
            return self._egress(context.tenant_id, url, "the payload's url")
        return None

    def _egress(self, tenant_id: str, url: str, what: str) -> PolicyDecision | None:
        patterns = self._tenant_egress.get(tenant_id, self._default_egress)
        host = egress_host(url)
        if host is None:
            # The text is never echoed: a URL may carry userinfo or a token.
            return self._deny(
                DenialReason.EGRESS_DENIED,
                f"the host of {what} cannot be read unambiguously",
                EGRESS_GATE,
            )
        if not host_allowed(host, patterns):
            return self._deny(
                DenialReason.EGRESS_DENIED,
                f"egress to {host} ({what}) is not on the allow list",
                EGRESS_GATE,
            )
        return None

    def _deny(self, reason: DenialReason, detail: str, rule: str) -> PolicyDecision:
        return PolicyDecision(
            allowed=False,
            reason=reason,
            detail=detail,
            policy_version=self.version,
            policy_digest=self.digest,
            policy_ids=(rule,),
        )


CAPABILITY_GATE = "arvis.capability_gate"
"""The id a refusal by the built-in capability gate records."""
EGRESS_GATE = "arvis.egress_gate"
"""The id a refusal by the built-in egress gate records."""


def payload_url(payload: FrozenEffectPayload) -> str | None:
    """The payload's top-level ``url`` string, which a network tool without a fixed
    destination reaches; None when there is none."""
    url = payload.value.get("url") if isinstance(payload.value, dict) else None
    return url if isinstance(url, str) else None


_CONSENT_REASONS = {
    "consent_tools": "tool {!r} is on the list of tools that need consent",
    "approvals": "tool {!r} has approval terms, so it needs consent",
    "consent_for_mutating_unsafe": "tool {!r} is mutating and replay-unsafe",
}
"""Why each consent rule asks (the approver is shown it beside the rule's id)."""


def _consent_rule(definition: ToolDefinition, rules: TenantRules) -> tuple[str, bool] | None:
    """The consent rule that applies to ``definition`` and what it says, or None."""
    if definition.name in rules.no_consent_tools:
        return "no_consent_tools", False
    if definition.name in rules.consent_tools:
        return "consent_tools", True
    if definition.name in rules.approvals:
        return "approvals", True
    if (
        rules.consent_for_mutating_unsafe
        and definition.effect is Effect.MUTATING
        and definition.replay_safety is ReplaySafety.UNSAFE
    ):
        return "consent_for_mutating_unsafe", True
    return None

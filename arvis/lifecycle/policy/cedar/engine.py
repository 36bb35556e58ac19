"""CedarPolicy: a :class:`ToolPolicy` whose decision is a Cedar policy set's (docs/policy.md).

The capability and egress gates of the tenant's rules run first and hold
whatever the policies say. Then one ``is_authorized`` per admission, on the
policy set parsed and validated once at start-up: ``Allow`` (some ``permit``
matched and no ``forbid``) allows, with consent when a deciding permit carries
``@consent("required")``; anything else refuses ``policy_denied`` — a matching
``forbid`` (deny wins), no matching ``permit``, or a policy that failed to
evaluate: Cedar skips a policy that errors, which for a ``forbid`` would let the
call through, so ARVIS refuses instead.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cedarpy

from arvis.domain.authorization import DenialReason, PolicyDecision
from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.definitions import ToolDefinition
from arvis.domain.egress import egress_host
from arvis.domain.payload import FrozenEffectPayload
from arvis.lifecycle.policy.cedar.schema import (
    ConversionError,
    Record,
    context_type,
    payload_type,
    record_to_cedar,
    render_schema,
)
from arvis.lifecycle.policy.cedar.source import CompiledPolicies, compile_policies, find_files
from arvis.lifecycle.policy.policy import PolicyConfig, PolicyQuery, RulePolicy, payload_url

ENGINE = "cedar"
ACTION = {"type": "Arvis::Action", "id": "tool.execute"}
CEDAR_INPUT = "arvis.cedar_input"
"""The id a refusal records when the call cannot be put to Cedar."""
_DETAIL_LIMIT = 300
_REMEMBERED_ENTITIES = 4096
# Cedar names a policy that failed to evaluate by its id, in backquotes.
_FAILED_POLICY = re.compile(r"policy `([^`]+)`")


class CedarPolicy:
    """The Cedar engine over the built-in gates."""

    def __init__(
        self, compiled: CompiledPolicies, payload: Record, config: PolicyConfig | None = None
    ) -> None:
        self.compiled = compiled
        self.payload = payload
        self.gates = RulePolicy(config)
        self.version = self.gates.version
        # One fingerprint for what decides: the policy files, the schema they were
        # validated against, and the gates' rules beside them. It is the digest every
        # snapshot records and the one `arvis policy validate` prints.
        self.fingerprint = sha256_hex(
            canonical_bytes({"cedar": compiled.fingerprint, "gates": self.gates.digest})
        )
        self.digest = self.fingerprint
        self._consent = {cid for cid, p in compiled.policies.items() if p.consent}
        self._parsed: OrderedDict[tuple[Any, ...], cedarpy.Entities] = OrderedDict()

    @classmethod
    def load(
        cls, config: PolicyConfig, base_dir: Path, definitions: Iterable[ToolDefinition]
    ) -> CedarPolicy:
        """Find, parse and validate ``config.policies`` against the schema of this plan."""
        assert config.policies is not None
        payload = payload_type(definitions)
        compiled = compile_policies(
            find_files(config.policies, base_dir), render_schema(payload), context_type(payload)
        )
        return cls(compiled, payload, config)

    def evaluate(self, query: PolicyQuery) -> PolicyDecision:
        gate = self.gates.gate(query)
        if gate is not None:
            return self._decision(False, gate.reason, gate.detail, gate.policy_ids)
        context, definition = query.context, query.definition
        try:
            request = self.request(query)
        except ConversionError as exc:
            return self._decision(False, DenialReason.POLICY_DENIED, str(exc), (CEDAR_INPUT,))
        try:
            # Everything the entities hold, so equal keys mean equal entities.
            key = (
                context.tenant_id,
                context.principal_id,
                context.roles,
                context.auth_method,
                context.key_id,
                context.issuer,
                context.plan_id,
                definition.name,
                definition.fingerprint,
            )
            answer = cedarpy.is_authorized(
                request["request"], self.compiled.policy_set, self._entities(key, request)
            )
        except ValueError as exc:
            return self._decision(
                False,
                DenialReason.POLICY_DENIED,
                f"the call cannot be put to Cedar: {str(exc)[:_DETAIL_LIMIT]}",
                (CEDAR_INPUT,),
            )
        decision = self._answer(answer)
        if decision.consent_required:
            # Who may approve, and how many must: [policy] approvals, as under the rules.
            terms = self.gates.approval_terms(context.tenant_id, definition.name)
            if terms is not None:
                decision = decision.model_copy(update={"approval": terms})
        return decision

    def _answer(self, answer: cedarpy.AuthzResult) -> PolicyDecision:
        diagnostics = answer.diagnostics
        reasons = sorted(diagnostics.reasons)
        labels = tuple(self._label(cedar_id) for cedar_id in reasons)
        if diagnostics.errors:
            failed = "; ".join(diagnostics.errors)
            erring = sorted(set(_FAILED_POLICY.findall(failed)))
            return self._decision(
                False,
                DenialReason.POLICY_DENIED,
                f"a policy could not be evaluated, so the call is refused: "
                f"{failed[:_DETAIL_LIMIT]}",
                tuple(self._label(cedar_id) for cedar_id in erring) or (CEDAR_INPUT,),
            )
        if answer.allowed:
            asking = [self._label(cedar_id) for cedar_id in reasons if cedar_id in self._consent]
            detail = f"permitted only with consent by {', '.join(asking)}" if asking else ""
            return self._decision(True, None, detail, labels, consent=bool(asking))
        if reasons:
            return self._decision(
                False,
                DenialReason.POLICY_DENIED,
                f"forbidden by policy {', '.join(labels)}",
                labels,
            )
        return self._decision(False, DenialReason.POLICY_DENIED, "no policy permits this call", ())

    def _entities(self, key: tuple[Any, ...], request: dict[str, Any]) -> cedarpy.Entities:
        """The parsed entity set, remembered: an agent repeats one principal and a few
        tools, and parsing the set is half of what an evaluation costs."""
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = cedarpy.Entities.from_json_str(json.dumps(request["entities"]))
            self._parsed[key] = parsed
            if len(self._parsed) > _REMEMBERED_ENTITIES:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(key)
        return parsed

    def _label(self, cedar_id: str) -> str:
        policy = self.compiled.policies.get(cedar_id)
        return cedar_id if policy is None else policy.label

    def _decision(
        self,
        allowed: bool,
        reason: DenialReason | None,
        detail: str,
        policy_ids: tuple[str, ...],
        *,
        consent: bool = False,
    ) -> PolicyDecision:
        return PolicyDecision.model_construct(
            allowed=allowed,
            reason=reason,
            detail=detail,
            consent_required=consent,
            policy_version=self.version,
            policy_digest=self.digest,
            policy_engine=ENGINE,
            policy_ids=policy_ids,
        )

    def request(self, query: PolicyQuery) -> dict[str, Any]:
        """The Cedar request and entities for one call (``arvis policy check`` shows them).

        Raises :class:`ConversionError` when the payload does not fit the schema's types.
        """
        context, definition, payload = query.context, query.definition, query.payload
        tenant = {"type": "Arvis::Tenant", "id": context.tenant_id}
        principal = {"type": "Arvis::Principal", "id": context.principal_id}
        tool = {"type": "Arvis::Tool", "id": definition.name}
        principal_attrs: dict[str, Any] = {
            "tenant": context.tenant_id,
            "roles": list(context.roles),
            "auth_method": context.auth_method,
        }
        if context.key_id is not None:
            principal_attrs["key_id"] = context.key_id
        if context.issuer is not None:
            principal_attrs["issuer"] = context.issuer
        value = payload.value
        cedar_context: dict[str, Any] = {
            "run_id": context.run_id,
            "causal_id": context.causal_id,
            "attempt": query.attempt,
            "payload_digest": payload.digest,
            "payload": record_to_cedar(value, self.payload, "payload")
            if isinstance(value, dict)
            else {},
            "time": {"__extn": {"fn": "datetime", "arg": _instant(query.now)}},
        }
        if context.actor is not None:
            actor: dict[str, str] = {
                "id": context.actor.principal_id,
                "auth_method": context.actor.method,
            }
            if context.actor.key_id is not None:
                actor["key_id"] = context.actor.key_id
            cedar_context["actor"] = actor
        host = self._egress_host(definition, payload, query.destination)
        if host is not None:
            cedar_context["egress_host"] = host
        entities = [
            {"uid": principal, "attrs": principal_attrs, "parents": [tenant]},
            {"uid": tenant, "attrs": {}, "parents": []},
            {
                "uid": tool,
                "attrs": {
                    "name": definition.name,
                    "effect": definition.effect.value,
                    "replay_safety": definition.replay_safety.value,
                    "capabilities": list(definition.capabilities),
                    "plan_id": context.plan_id,
                    "fingerprint": definition.fingerprint,
                },
                "parents": [],
            },
        ]
        request = {
            "principal": principal,
            "action": ACTION,
            "resource": tool,
            "context": cedar_context,
        }
        return {"request": request, "entities": entities}

    @staticmethod
    def _egress_host(
        definition: ToolDefinition, payload: FrozenEffectPayload, destination: str | None
    ) -> str | None:
        if destination is not None:
            return egress_host(destination)
        if "network.access" in definition.capabilities:
            url = payload_url(payload)
            return None if url is None else egress_host(url)
        return None


def _instant(now: datetime | None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

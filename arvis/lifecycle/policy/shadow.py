"""Shadow mode: enforce one policy, evaluate another beside it, and count where they differ.

``[policy] engine = "cedar"`` with ``mode = "shadow"``: the rules decide every call
(their decision is the one recorded and enforced); the Cedar policies are
evaluated on the same call, and a different verdict is logged (tool, tenant,
principal, run, causal id, both verdicts and the Cedar policies that decided) and
counted by kind, which ``/metrics`` exports as
``arvis_policy_shadow_disagreements_total{kind}``. Nothing the shadow says, or
fails to say, changes a decision.
"""

from __future__ import annotations

import logging
from collections import Counter

from arvis.domain.authorization import PolicyDecision
from arvis.lifecycle.policy.policy import PolicyQuery, ToolPolicy

log = logging.getLogger(__name__)

KINDS = ("enforced_allows_shadow_denies", "enforced_denies_shadow_allows", "consent", "error")
"""Disagreement kinds: one verdict allows and the other refuses (either way round),
both allow but only one asks for consent, or the shadow could not decide at all."""


def verdict(decision: PolicyDecision) -> str:
    if not decision.allowed:
        return f"deny ({decision.reason})"
    return "allow with consent" if decision.consent_required else "allow"


class ShadowPolicy:
    """``enforced`` decides; ``shadow`` is only compared."""

    def __init__(self, enforced: ToolPolicy, shadow: ToolPolicy) -> None:
        self.enforced = enforced
        self.shadow = shadow
        self.disagreements: Counter[str] = Counter({kind: 0 for kind in KINDS})
        self.evaluations = 0

    def evaluate(self, query: PolicyQuery) -> PolicyDecision:
        decision = self.enforced.evaluate(query)
        self.evaluations += 1
        context, definition = query.context, query.definition
        try:
            other = self.shadow.evaluate(query)
        except Exception:  # the shadow never decides: whatever it raises is counted
            self.disagreements["error"] += 1
            log.exception("the shadow policy failed on tool %s", definition.name)
            return decision
        kind = _disagreement(decision, other)
        if kind is not None:
            self.disagreements[kind] += 1
            log.warning(
                "policy shadow disagreement (%s): tool %s, tenant %s, principal %s, run %s, "
                "causal %s: enforced %s [%s], shadow %s [%s]",
                kind,
                definition.name,
                context.tenant_id,
                context.principal_id,
                context.run_id,
                context.causal_id,
                verdict(decision),
                ", ".join(decision.policy_ids),
                verdict(other),
                ", ".join(other.policy_ids),
            )
        return decision


def _disagreement(enforced: PolicyDecision, shadow: PolicyDecision) -> str | None:
    if enforced.allowed and not shadow.allowed:
        return "enforced_allows_shadow_denies"
    if shadow.allowed and not enforced.allowed:
        return "enforced_denies_shadow_allows"
    if enforced.allowed and enforced.consent_required != shadow.consent_required:
        return "consent"
    return None

"""The identity of one attempt (DESIGN §1, §4): which run, which decision in it, which
try of that decision. Every write about an attempt names it the same way, so it is one
value passed whole instead of five fields spelled out at each step."""

from __future__ import annotations

from dataclasses import dataclass

from arvis.domain.ids import RunId, TenantId


@dataclass(frozen=True, slots=True)
class AttemptKey:
    """One attempt of one decision of a run."""

    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    """The run's name for the decision (a decision is bound to one idempotency key)."""
    idempotency_key: str
    attempt: int | None = None
    """The attempt's number; None for what is about the decision rather than one
    attempt of it (a consent, a refusal that is not an attempt, a resolution's entry)."""

    def decision(self) -> AttemptKey:
        """The same decision, no attempt named."""
        return AttemptKey(self.tenant_id, self.run_id, self.causal_id, self.idempotency_key)

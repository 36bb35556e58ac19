"""A model of DESIGN §4 for one idempotency key, for the reliability state machine.

The model holds what the lifecycle has told us about each key (the boundary of
its last attempt, its consent, whether an attempt was abandoned) and predicts
what the next ``tool.execute`` of that key must answer.
"""

from __future__ import annotations

from dataclasses import dataclass

UNCERTAIN = ("EFFECT_STARTED", "EFFECT_STATE_UNKNOWN")
RETRY_FREE = ("PRE_EFFECT_REFUSAL", "EFFECT_NOT_STARTED")


@dataclass
class KeyModel:
    causal_id: str
    tool: str
    unsafe: bool
    needs_consent: bool
    last_boundary: str | None = None
    last_retryable: bool = False
    in_flight: bool = False
    confirmation_id: str | None = None
    confirmation_state: str | None = None
    requester: str | None = None
    """The principal that asked for consent: only it may act under it (DESIGN §4)."""
    crash_started: bool = False
    """The abandoned attempt in flight had reported its start (recovery: EFFECT_STARTED)."""
    dispatched: int = 0
    """Attempts that consumed a capability: executed or abandoned mid-dispatch."""
    sealed: bool = False
    """An unsafe tool's effect may have happened: it must never run again."""

    def expect(self, caller: str) -> tuple[str, str | None]:
        """(outcome, reason) the next syscall by ``caller`` must answer;
        ("in_flight", None) for a 409."""
        if self.requester is not None and caller != self.requester:
            return "refused", "identity_mismatch"
        if self.in_flight:
            return "in_flight", None
        last = self.last_boundary
        if last == "EFFECT_COMPLETED":
            return "deduplicated", None
        if last == "EFFECT_FAILED" and not self.last_retryable:
            return "refused", "retry_not_advised"
        if last in UNCERTAIN and self.unsafe:
            return "refused", "retry_prohibited_uncertain"
        if self.needs_consent:
            if self.confirmation_state in (None, "PENDING"):
                return "confirmation_required", None
            if self.confirmation_state == "DENIED":
                return "refused", "confirmation_denied"
        return "executed", None

    def executed(self, boundary: str, retryable: bool) -> None:
        self.dispatched += 1
        self.settled(boundary, retryable)

    def settled(self, boundary: str, retryable: bool) -> None:
        self.last_boundary = boundary
        self.last_retryable = retryable
        if self.unsafe and boundary not in RETRY_FREE:
            self.sealed = True
        if self.confirmation_id is not None and self.confirmation_state in ("APPROVED", "RESERVED"):
            self.confirmation_state = "APPROVED" if boundary in RETRY_FREE else "CONSUMED"

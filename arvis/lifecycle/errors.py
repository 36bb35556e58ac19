"""Errors the lifecycle raises to its callers (not refusals: those are results)."""

from __future__ import annotations

from arvis.domain.errors import ArvisError


class AttemptInFlight(ArvisError):
    """An attempt of this idempotency key is running right now (DESIGN §4)."""

    code = "attempt_in_flight"

    def __init__(self, idempotency_key: str) -> None:
        super().__init__("an attempt of this action is in flight; ask again once it has settled")
        self.idempotency_key = idempotency_key


class ShuttingDown(ArvisError):
    """This instance stopped admitting syscalls; another instance can take them."""

    code = "shutting_down"


class IdentityRefused(ArvisError):
    """The caller's identity is not acceptable in this environment."""

    code = "unauthenticated"


class RunOfAnotherPrincipal(ArvisError):
    """The run is bound to another principal of the tenant (DESIGN §10 "A decision
    belongs to its principal"): its syscalls and its results are that principal's.
    Nothing was recorded."""

    code = "identity_mismatch"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} belongs to another principal; nothing was recorded. "
            "Use a run of your own"
        )
        self.run_id = run_id


class RunNotServed(ArvisError):
    """This instance serves one turn's run (``arvis serve-turn RUN``) and the syscall
    names another; nothing was recorded. Send it to that run's instance."""

    code = "run_not_served"


class AuditSinkFailure(ArvisError):
    """The audit sink raised or answered an invalid receipt: nothing was run."""

    code = "audit_unavailable"


class InvalidReceipt(AuditSinkFailure):
    code = "audit_receipt_invalid"


class CapabilityError(ArvisError):
    """A capability transition that must succeed did not (zero rows changed)."""

    code = "capability_state_conflict"


class JournalConflict(ArvisError):
    """A different result is already journaled for this attempt."""

    code = "journal_conflict"


class NotFound(ArvisError):
    """No such object for this tenant (another tenant's objects included)."""

    code = "not_found"


class ConfirmationStateConflict(ArvisError):
    """The confirmation is not in a state that allows this transition."""

    code = "conflict"


class NotRequester(ArvisError):
    """A caller without the approver role tried to deny a confirmation it did not ask
    for: only its requester may withdraw it."""

    code = "identity_mismatch"


class SelfApproval(ArvisError):
    """An approver tried to approve their own request (four eyes, DESIGN §4)."""

    code = "self_approval"


class ChainBroken(ArvisError):
    """A run's evidence does not verify (its chain, its signed checkpoints or the
    witness): neither replay nor a deduplicated answer hands any of it to anyone."""

    code = "chain_broken"

    def __init__(self, run_id: str, position: int, reason: str) -> None:
        super().__init__(
            f"the journal of run {run_id!r} is broken at position {position} ({reason}); "
            "nothing was replayed or served from it"
        )
        self.broken_at = position
        self.reason = reason


class ApproverNotInGroup(ArvisError):
    """The approver's key holds none of the groups this tool's consent names."""

    code = "approver_not_in_group"


class AlreadyApproved(ArvisError):
    """This principal has approved this confirmation already: approvals are distinct."""

    code = "already_approved"


class NotUncertain(ArvisError):
    """The attempt's outcome is known: there is nothing to resolve."""

    code = "not_uncertain"


class AlreadyResolved(ArvisError):
    """The attempt was resolved already; a resolution is never replaced."""

    code = "already_resolved"


class SelfResolution(ArvisError):
    """The principal whose call it was may not resolve it alone (four eyes)."""

    code = "self_resolution"

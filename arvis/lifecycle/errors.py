"""Errors the lifecycle raises to its callers (not refusals: those are results)."""

from __future__ import annotations

from arvis.domain.errors import ArvisError, fields


@fields
class AttemptInFlight(ArvisError, code="attempt_in_flight"):
    """An attempt of this idempotency key is running right now (DESIGN §4)."""

    template = "an attempt of this action is in flight; ask again once it has settled"
    idempotency_key: str


class ShuttingDown(ArvisError, code="shutting_down"):
    """This instance stopped admitting syscalls; another instance can take them."""


class IdentityRefused(ArvisError, code="unauthenticated"):
    """The caller's identity is not acceptable in this environment."""


@fields
class RunOfAnotherPrincipal(ArvisError, code="identity_mismatch"):
    """The run is bound to another principal of the tenant (DESIGN §10 "A decision
    belongs to its principal"): its syscalls and its results are that principal's.
    Nothing was recorded."""

    template = (
        "run {run_id!r} belongs to another principal; nothing was recorded. Use a run of your own"
    )
    run_id: str


class RunNotServed(ArvisError, code="run_not_served"):
    """This instance serves one turn's run (``arvis serve-turn RUN``) and the syscall
    names another; nothing was recorded. Send it to that run's instance."""


class AuditSinkFailure(ArvisError, code="audit_unavailable"):
    """The audit sink raised or answered an invalid receipt: nothing was run."""


class InvalidReceipt(AuditSinkFailure, code="audit_receipt_invalid"):
    """The audit sink answered a receipt that is not valid."""


class CapabilityError(ArvisError, code="capability_state_conflict"):
    """A capability transition that must succeed did not (zero rows changed)."""


class JournalConflict(ArvisError, code="journal_conflict"):
    """A different result is already journaled for this attempt."""


class NotFound(ArvisError, code="not_found"):
    """No such object for this tenant (another tenant's objects included)."""


class ConfirmationStateConflict(ArvisError, code="conflict"):
    """The confirmation is not in a state that allows this transition."""


class NotRequester(ArvisError, code="identity_mismatch"):
    """A caller without the approver role tried to deny a confirmation it did not ask
    for: only its requester may withdraw it."""


class SelfApproval(ArvisError, code="self_approval"):
    """An approver tried to approve their own request (four eyes, DESIGN §4)."""


@fields
class ChainBroken(ArvisError, code="chain_broken"):
    """A run's evidence does not verify (its chain, its signed checkpoints or the
    witness): neither replay nor a deduplicated answer hands any of it to anyone."""

    template = (
        "the journal of run {run_id!r} is broken at position {broken_at} ({reason}); "
        "nothing was replayed or served from it"
    )
    run_id: str
    broken_at: int
    reason: str


class ApproverNotInGroup(ArvisError, code="approver_not_in_group"):
    """The approver's key holds none of the groups this tool's consent names."""


class AlreadyApproved(ArvisError, code="already_approved"):
    """This principal has approved this confirmation already: approvals are distinct."""


class NotUncertain(ArvisError, code="not_uncertain"):
    """The attempt's outcome is known: there is nothing to resolve."""


class AlreadyResolved(ArvisError, code="already_resolved"):
    """The attempt was resolved already; a resolution is never replaced."""


class SelfResolution(ArvisError, code="self_resolution"):
    """The principal whose call it was may not resolve it alone (four eyes)."""

"""Capability and confirmation states and their transition tables (DESIGN §1, §2, §4).

The tables are the rules; the store records states, it never decides them. A
transition inside one transaction is recorded as one row version carrying each
transition's time (a capability is written already ``CONSUMED``); a transition
that crosses transactions is a conditional update from the states named here.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from enum import StrEnum

from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import ArvisError


class CapabilityState(StrEnum):
    MINTED = "MINTED"
    ACTIVE = "ACTIVE"
    CONSUMED = "CONSUMED"
    REVOKED = "REVOKED"


class ConfirmationState(StrEnum):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    RESERVED = "RESERVED"
    CONSUMED = "CONSUMED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"


CAPABILITY_TRANSITIONS: Mapping[CapabilityState, frozenset[CapabilityState]] = {
    CapabilityState.MINTED: frozenset({CapabilityState.ACTIVE, CapabilityState.REVOKED}),
    CapabilityState.ACTIVE: frozenset({CapabilityState.CONSUMED, CapabilityState.REVOKED}),
    CapabilityState.CONSUMED: frozenset(),
    CapabilityState.REVOKED: frozenset(),
}

CONFIRMATION_TRANSITIONS: Mapping[ConfirmationState, frozenset[ConfirmationState]] = {
    ConfirmationState.PENDING: frozenset(
        {ConfirmationState.APPROVED, ConfirmationState.DENIED, ConfirmationState.EXPIRED}
    ),
    ConfirmationState.APPROVED: frozenset(
        {ConfirmationState.RESERVED, ConfirmationState.DENIED, ConfirmationState.EXPIRED}
    ),
    # Reserved for one attempt: released only when the effect provably did not start.
    ConfirmationState.RESERVED: frozenset({ConfirmationState.APPROVED, ConfirmationState.CONSUMED}),
    ConfirmationState.CONSUMED: frozenset(),
    ConfirmationState.DENIED: frozenset(),
    ConfirmationState.EXPIRED: frozenset(),
}

# The capability of an admitted attempt: minted, activated by its receipt and
# consumed in the admission transaction, in this order.
ADMISSION_PATH = (CapabilityState.MINTED, CapabilityState.ACTIVE, CapabilityState.CONSUMED)


class StateTransitionError(ArvisError):
    """A transition the tables do not allow."""

    code = "state_transition_invalid"


def check_capability_transition(current: CapabilityState, to: CapabilityState) -> None:
    if to not in CAPABILITY_TRANSITIONS[current]:
        raise StateTransitionError(f"a capability cannot go from {current} to {to}")


def check_confirmation_transition(current: ConfirmationState, to: ConfirmationState) -> None:
    if to not in CONFIRMATION_TRANSITIONS[current]:
        raise StateTransitionError(f"a confirmation cannot go from {current} to {to}")


def check_path(path: tuple[CapabilityState, ...]) -> None:
    """Every step of ``path`` is an allowed capability transition."""
    for current, to in itertools.pairwise(path):
        check_capability_transition(current, to)


def settled_confirmation(boundary: EffectBoundary) -> ConfirmationState:
    """Where a RESERVED confirmation goes when its attempt is journaled (DESIGN §2):
    back to APPROVED only when the effect provably did not start, else CONSUMED."""
    return ConfirmationState.APPROVED if boundary.retry_is_free else ConfirmationState.CONSUMED


check_path(ADMISSION_PATH)

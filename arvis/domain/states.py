"""Capability and confirmation states and their transition tables (DESIGN §1, §2, §4).

The tables are the rules; the store records states, it never decides them. A
transition inside one transaction is recorded as one row version carrying each
transition's time (a capability is written already ``CONSUMED``); a transition
that crosses transactions is a conditional update from the states named here.

The lifecycle calls them: every confirmation change it asks the store for is
checked against :data:`CONFIRMATION_TRANSITIONS` when it is built
(``ConfirmationChange``), its "from" states are :func:`confirmation_sources`, and
the conditional updates the server-side functions hard-code (``store/sql/``) are
checked against the same tables by a test. Consent expiry is one rule,
:func:`consent_expired`, judged by the database's clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import datetime
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

ROUND_RENEWALS: Mapping[ConfirmationState, frozenset[ConfirmationState]] = {
    # A resolution as not started of the attempt that used a consent up opens the
    # consent's next round of approval (DESIGN §10, revision 0010): the round before
    # stays CONSUMED in the journal; the new one starts PENDING, or APPROVED when the
    # resolver's approval alone meets the quorum.
    ConfirmationState.CONSUMED: frozenset({ConfirmationState.PENDING, ConfirmationState.APPROVED}),
}
"""Transitions that open a new round rather than move within one."""

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


def check_round_renewal(current: ConfirmationState, to: ConfirmationState) -> None:
    if to not in ROUND_RENEWALS.get(current, frozenset()):
        raise StateTransitionError(f"a new round of consent cannot go from {current} to {to}")


def confirmation_sources(to: ConfirmationState) -> tuple[ConfirmationState, ...]:
    """The states a confirmation may go to ``to`` from, in the order of the enum."""
    return tuple(s for s in ConfirmationState if to in CONFIRMATION_TRANSITIONS[s])


WAITING = confirmation_sources(ConfirmationState.EXPIRED)
"""A consent still waiting to be used (PENDING, APPROVED): what a deny or the expiry
ends. The only states a consent's time runs out in."""


def consent_expired(state: ConfirmationState, expires_at: datetime, at: datetime) -> bool:
    """The one expiry rule (DESIGN §4): a waiting consent expires at ``expires_at``
    by the database's clock ``at`` (the moment included). The store's statements
    apply the same rule, ``expires_at <= now()``, when they use or list a consent."""
    return state in WAITING and expires_at <= at


def check_path(path: tuple[CapabilityState, ...]) -> None:
    """Every step of ``path`` is an allowed capability transition."""
    for current, to in itertools.pairwise(path):
        check_capability_transition(current, to)


def settled_confirmation(boundary: EffectBoundary) -> ConfirmationState:
    """Where a RESERVED confirmation goes when its attempt is journaled (DESIGN §2):
    back to APPROVED only when the effect provably did not start, else CONSUMED."""
    to = ConfirmationState.APPROVED if boundary.retry_is_free else ConfirmationState.CONSUMED
    check_confirmation_transition(ConfirmationState.RESERVED, to)
    return to


CONSUMED_CAPABILITY = ADMISSION_PATH[-1]
"""The state every journaled attempt's capability is recorded in."""


check_path(ADMISSION_PATH)

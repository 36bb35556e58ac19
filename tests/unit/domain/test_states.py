"""Capability and confirmation transition tables (DESIGN §1, §2, §4)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arvis.domain.boundary import EffectBoundary
from arvis.domain.states import (
    ADMISSION_PATH,
    CAPABILITY_TRANSITIONS,
    CONFIRMATION_TRANSITIONS,
    ROUND_RENEWALS,
    WAITING,
    CapabilityState,
    ConfirmationState,
    StateTransitionError,
    check_capability_transition,
    check_confirmation_transition,
    check_path,
    check_round_renewal,
    confirmation_sources,
    consent_expired,
    settled_confirmation,
)

Cap = CapabilityState
Conf = ConfirmationState

# The DESIGN's words, written out again: the tables in code must say exactly this.
CAPABILITY_ALLOWED = {
    (Cap.MINTED, Cap.ACTIVE),
    (Cap.MINTED, Cap.REVOKED),
    (Cap.ACTIVE, Cap.CONSUMED),
    (Cap.ACTIVE, Cap.REVOKED),
}
CONFIRMATION_ALLOWED = {
    (Conf.PENDING, Conf.APPROVED),
    (Conf.PENDING, Conf.DENIED),
    (Conf.PENDING, Conf.EXPIRED),
    (Conf.APPROVED, Conf.RESERVED),
    (Conf.APPROVED, Conf.DENIED),
    (Conf.APPROVED, Conf.EXPIRED),
    (Conf.RESERVED, Conf.CONSUMED),
    # Released only when the effect provably did not start.
    (Conf.RESERVED, Conf.APPROVED),
}
CAPABILITY_TERMINAL = (Cap.CONSUMED, Cap.REVOKED)
CONFIRMATION_TERMINAL = (Conf.CONSUMED, Conf.DENIED, Conf.EXPIRED)


def test_every_state_has_a_row_in_its_table() -> None:
    assert set(CAPABILITY_TRANSITIONS) == set(CapabilityState)
    assert set(CONFIRMATION_TRANSITIONS) == set(ConfirmationState)


def test_the_capability_table_allows_exactly_the_designed_transitions() -> None:
    table = {(a, b) for a, targets in CAPABILITY_TRANSITIONS.items() for b in targets}
    assert table == CAPABILITY_ALLOWED


def test_the_confirmation_table_allows_exactly_the_designed_transitions() -> None:
    table = {(a, b) for a, targets in CONFIRMATION_TRANSITIONS.items() for b in targets}
    assert table == CONFIRMATION_ALLOWED


@pytest.mark.parametrize(("current", "to"), sorted(CAPABILITY_ALLOWED))
def test_an_allowed_capability_transition_passes(
    current: CapabilityState, to: CapabilityState
) -> None:
    check_capability_transition(current, to)


@pytest.mark.parametrize(("current", "to"), sorted(CONFIRMATION_ALLOWED))
def test_an_allowed_confirmation_transition_passes(
    current: ConfirmationState, to: ConfirmationState
) -> None:
    check_confirmation_transition(current, to)


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Cap.MINTED, Cap.CONSUMED),  # consumed without a receipt
        (Cap.CONSUMED, Cap.ACTIVE),  # a second use
        (Cap.CONSUMED, Cap.CONSUMED),
        (Cap.REVOKED, Cap.ACTIVE),  # revived
        (Cap.ACTIVE, Cap.MINTED),
        (Cap.MINTED, Cap.MINTED),
    ],
)
def test_a_capability_transition_outside_the_table_is_refused(
    current: CapabilityState, to: CapabilityState
) -> None:
    with pytest.raises(StateTransitionError) as caught:
        check_capability_transition(current, to)
    assert caught.value.code == "state_transition_invalid"
    assert f"from {current} to {to}" in caught.value.message


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Conf.PENDING, Conf.RESERVED),  # used before anyone approved
        (Conf.PENDING, Conf.CONSUMED),
        (Conf.DENIED, Conf.APPROVED),  # a denial is final
        (Conf.EXPIRED, Conf.APPROVED),
        (Conf.CONSUMED, Conf.APPROVED),  # consent used up is not handed back
        (Conf.CONSUMED, Conf.RESERVED),
        (Conf.RESERVED, Conf.DENIED),  # an attempt is running under it
        (Conf.RESERVED, Conf.EXPIRED),
        (Conf.APPROVED, Conf.PENDING),
        (Conf.APPROVED, Conf.CONSUMED),  # consumed without a reservation
    ],
)
def test_a_confirmation_transition_outside_the_table_is_refused(
    current: ConfirmationState, to: ConfirmationState
) -> None:
    with pytest.raises(StateTransitionError):
        check_confirmation_transition(current, to)


@pytest.mark.parametrize("state", CAPABILITY_TERMINAL)
def test_a_terminal_capability_goes_nowhere(state: CapabilityState) -> None:
    assert CAPABILITY_TRANSITIONS[state] == frozenset()
    for to in CapabilityState:
        with pytest.raises(StateTransitionError):
            check_capability_transition(state, to)


@pytest.mark.parametrize("state", CONFIRMATION_TERMINAL)
def test_a_terminal_confirmation_goes_nowhere(state: ConfirmationState) -> None:
    assert CONFIRMATION_TRANSITIONS[state] == frozenset()
    for to in ConfirmationState:
        with pytest.raises(StateTransitionError):
            check_confirmation_transition(state, to)


def test_only_the_terminal_states_have_no_way_out() -> None:
    assert {s for s, t in CAPABILITY_TRANSITIONS.items() if not t} == set(CAPABILITY_TERMINAL)
    assert {s for s, t in CONFIRMATION_TRANSITIONS.items() if not t} == set(CONFIRMATION_TERMINAL)


def test_the_admission_path_mints_activates_and_consumes() -> None:
    assert ADMISSION_PATH == (Cap.MINTED, Cap.ACTIVE, Cap.CONSUMED)
    check_path(ADMISSION_PATH)


@pytest.mark.parametrize(
    "path",
    [
        (Cap.MINTED, Cap.CONSUMED),
        (Cap.MINTED, Cap.ACTIVE, Cap.CONSUMED, Cap.ACTIVE),
        (Cap.MINTED, Cap.REVOKED, Cap.ACTIVE),
    ],
)
def test_a_path_with_one_illegal_step_is_refused(path: tuple[CapabilityState, ...]) -> None:
    with pytest.raises(StateTransitionError):
        check_path(path)


@pytest.mark.parametrize(
    ("boundary", "settled"),
    [
        (EffectBoundary.PRE_EFFECT_REFUSAL, Conf.APPROVED),
        (EffectBoundary.EFFECT_NOT_STARTED, Conf.APPROVED),
        (EffectBoundary.EFFECT_STARTED, Conf.CONSUMED),
        (EffectBoundary.EFFECT_COMPLETED, Conf.CONSUMED),
        (EffectBoundary.EFFECT_FAILED, Conf.CONSUMED),
        (EffectBoundary.EFFECT_STATE_UNKNOWN, Conf.CONSUMED),
    ],
)
def test_a_reserved_confirmation_is_released_only_when_nothing_started(
    boundary: EffectBoundary, settled: ConfirmationState
) -> None:
    assert settled_confirmation(boundary) is settled
    # Wherever it goes, the table lets it go there from RESERVED.
    check_confirmation_transition(Conf.RESERVED, settled)


def test_every_boundary_settles_a_confirmation() -> None:
    # A new boundary must say where consent goes; this fails until it is in the list above.
    assert {b for b in EffectBoundary if settled_confirmation(b) is Conf.APPROVED} == {
        EffectBoundary.PRE_EFFECT_REFUSAL,
        EffectBoundary.EFFECT_NOT_STARTED,
    }


_states = st.sampled_from(list(CapabilityState))


@given(st.lists(_states, max_size=8).map(tuple))
def test_any_path_check_path_accepts_follows_the_table(path: tuple[CapabilityState, ...]) -> None:
    steps = list(itertools.pairwise(path))
    legal = all((a, b) in CAPABILITY_ALLOWED for a, b in steps)
    try:
        check_path(path)
    except StateTransitionError:
        assert not legal
    else:
        assert legal
        # Nothing follows a terminal state: a consumed or revoked capability is spent.
        assert all(state not in CAPABILITY_TERMINAL for state in path[:-1])


@st.composite
def _walks(draw: st.DrawFn) -> tuple[CapabilityState, ...]:
    """A path that only ever takes a transition the table offers."""
    path = [draw(_states)]
    while targets := sorted(CAPABILITY_TRANSITIONS[path[-1]]):
        if not draw(st.booleans()):
            break
        path.append(draw(st.sampled_from(targets)))
    return tuple(path)


@given(_walks())
def test_any_walk_along_the_table_is_accepted(path: tuple[CapabilityState, ...]) -> None:
    check_path(path)


# -- the rules the lifecycle calls (issue 24) -----------------------------------------

AT = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize("state", list(ConfirmationState))
def test_only_a_waiting_consent_expires_and_the_moment_itself_is_too_late(
    state: ConfirmationState,
) -> None:
    waiting = state in (Conf.PENDING, Conf.APPROVED)
    assert consent_expired(state, AT, AT) is waiting
    assert consent_expired(state, AT - timedelta(microseconds=1), AT) is waiting
    assert consent_expired(state, AT + timedelta(microseconds=1), AT) is False


def test_the_waiting_states_are_those_a_consent_can_expire_from() -> None:
    assert WAITING == (Conf.PENDING, Conf.APPROVED)
    assert confirmation_sources(Conf.EXPIRED) == WAITING
    assert confirmation_sources(Conf.DENIED) == WAITING
    assert confirmation_sources(Conf.RESERVED) == (Conf.APPROVED,)


def test_a_new_round_opens_only_from_a_used_up_consent() -> None:
    assert {Conf.CONSUMED: frozenset({Conf.PENDING, Conf.APPROVED})} == ROUND_RENEWALS
    for current in ConfirmationState:
        for to in ConfirmationState:
            if current is Conf.CONSUMED and to in (Conf.PENDING, Conf.APPROVED):
                check_round_renewal(current, to)
            else:
                with pytest.raises(StateTransitionError):
                    check_round_renewal(current, to)


def test_a_settled_attempts_consent_goes_where_the_table_allows() -> None:
    for boundary in EffectBoundary:
        check_confirmation_transition(Conf.RESERVED, settled_confirmation(boundary))

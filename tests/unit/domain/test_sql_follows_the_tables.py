"""The server-side functions' hard-coded transitions are the domain's (issue 24).

``arvis/domain/states.py`` holds the rules; the statements of ``arvis/store/sql/``
apply some of them as conditional updates (``UPDATE confirmations SET state = …
WHERE … state = …``) and the triggers report some. Each such "from → to" is read out
of the SQL text here and checked against the tables, and every conditional update of
a confirmation's state is accounted for, so a new one cannot slip in unchecked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from arvis.domain.states import (
    CONFIRMATION_TRANSITIONS,
    ROUND_RENEWALS,
    WAITING,
    ConfirmationState,
    check_confirmation_transition,
    check_round_renewal,
    confirmation_sources,
)
from arvis.store.statements import EXPIRABLE_SQL

SQL = Path(__file__).resolve().parents[3] / "arvis" / "store" / "sql"
S = ConfirmationState
_UPDATE = re.compile(r"UPDATE confirmations\s+SET state = (?P<to>[^,]+),.*?;", re.S)
_FROM = re.compile(r"\bstate = (?:'(?P<one>[A-Z]+)'|ANY \((?P<any>[\w.]+)\))")


def _updates(name: str) -> list[tuple[str, list[str]]]:
    """(to, [from, …]) of each conditional update of a confirmation's state in ``name``."""
    text = (SQL / f"{name}.sql").read_text()
    found = []
    for match in _UPDATE.finditer(text):
        where = match.group(0).split("WHERE", 1)[1]
        sources = [m.group("one") or m.group("any") for m in _FROM.finditer(where)]
        found.append((match.group("to"), sources))
    return found


def test_admission_reserves_an_approved_consent_as_the_table_allows() -> None:
    [(to, sources)] = _updates("arvis_admit")
    assert (to, sources) == ("'RESERVED'", ["APPROVED"])
    check_confirmation_transition(S.APPROVED, S.RESERVED)


def test_the_journal_writer_moves_a_consent_only_as_python_decided() -> None:
    # The states come from the step's ConfirmationChange, which checks each against
    # the table when it is built (tests/unit/lifecycle: test_a_change_outside_...).
    [(to, sources)] = _updates("arvis_journal")
    assert (to, sources) == ("p.confirmation_to", ["p.confirmation_from"])


def test_an_approval_moves_a_pending_consent_as_the_table_allows() -> None:
    text = (SQL / "arvis_approve.sql").read_text()
    sources = re.findall(r"'confirmation_from', ARRAY\[([^\]]*)\]", text)
    assert sources == ["'PENDING'"]
    # p_to is APPROVED once the quorum is met (else PENDING stays PENDING).
    check_confirmation_transition(S.PENDING, S.APPROVED)


def test_a_resolution_opens_a_new_round_from_a_consumed_consent_only() -> None:
    [(to, sources)] = _updates("arvis_resolve")
    assert (to, sources) == ("p_consent ->> 'state'", ["CONSUMED"])
    for state in (S.PENDING, S.APPROVED):
        check_round_renewal(S.CONSUMED, state)


def test_every_conditional_update_of_a_consent_is_checked_here() -> None:
    counted = {
        path.stem: len(_updates(path.stem)) for path in SQL.glob("*.sql") if _updates(path.stem)
    }
    assert counted == {"arvis_admit": 1, "arvis_journal": 1, "arvis_resolve": 1}


def test_the_reported_decisions_are_transitions_of_the_tables() -> None:
    text = (SQL / "arvis_triggers.sql").read_text()
    when = text.split("tr_confirmations_decided", 1)[1]
    pairs = re.findall(r"OLD\.state = '([A-Z]+)' AND NEW\.state = '([A-Z]+)'", when)
    assert pairs == [("PENDING", "APPROVED")]
    for current, to in pairs:
        check_confirmation_transition(S(current), S(to))
    [(renewed_from, renewed_to)] = re.findall(
        r"OLD\.state = '([A-Z]+)' AND NEW\.state IN \(([^)]*)\)", when
    )
    for to in re.findall(r"'([A-Z]+)'", renewed_to):
        check_round_renewal(S(renewed_from), S(to))
    [ends] = re.findall(r"OR NEW\.state IN \(([^)]*)\)\)\)", when)
    for to in re.findall(r"'([A-Z]+)'", ends):
        assert confirmation_sources(S(to)), to


def test_the_expiry_sweep_lists_the_waiting_states() -> None:
    [listed] = re.findall(r"state IN \(([^)]*)\)", EXPIRABLE_SQL)
    assert tuple(S(s) for s in re.findall(r"'([A-Z]+)'", listed)) == WAITING
    assert WAITING == (S.PENDING, S.APPROVED)
    assert all(S.EXPIRED in CONFIRMATION_TRANSITIONS[state] for state in WAITING)


@pytest.mark.parametrize("state", list(ROUND_RENEWALS))
def test_only_a_used_up_consent_opens_a_new_round(state: ConfirmationState) -> None:
    assert state is S.CONSUMED

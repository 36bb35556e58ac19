"""Rules that are the code, one clock (issue 24).

- ``arvis_journal`` takes one typed argument, ``arvis_journal_step`` (a composite type:
  the entry and the state changes that go with it, by name), in place of 25 positional
  parameters with mode switches. Python builds it as one JSON record; ``arvis_approve``
  and ``arvis_resolve`` name only the fields they set.
- ``arvis_uncertain`` and ``arvis_resolved``: the domain's boundary sets, generated from
  ``arvis/domain/boundary.py``. The trigger ``tr_journal_entries_notify`` asks the first,
  the check ``ck_resolutions_boundary_resolved`` the second, rather than restating them.
- The triggers ``tr_journal_entries_notify``, ``tr_confirmations_requested`` and
  ``tr_confirmations_decided`` are defined in ``arvis/store/sql/arvis_triggers.sql``
  (revisions 0006 and 0010 defined them inline).
- One clock for consent expiry: ``arvis_request_consent`` creates a consent at the
  database's ``now()`` with the lifetime Python decided, and ``arvis_resolve`` opens a
  new round the same way, so the statements that use, list and expire a consent judge
  it by the clock its expiry was set by.

The texts this revision installs are frozen under ``arvis/migrations/sql/0011/`` (equal
to ``arvis/store/sql/`` while this is the head, which a test checks); the texts they
replace are revision 0010's, frozen under ``sql/0010/``. Downgrade reinstalls those,
the triggers as revision 0010 left them, and the check's literal set. No table data
changes either way.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 04:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_FROZEN = _MIGRATIONS / "sql" / "0011"
_PREVIOUS = _MIGRATIONS / "sql" / "0010"

# In dependency order: the type before the function that takes it, the boundary
# functions before the trigger and check that ask them.
FUNCTIONS = (
    "arvis_boundaries",
    "arvis_journal_step",
    "arvis_journal",
    "arvis_approve",
    "arvis_resolve",
    "arvis_request_consent",
)
TRIGGERS = "arvis_triggers"
CHANGED = ("arvis_journal", "arvis_approve", "arvis_resolve", "arvis_request_consent")
"""Revision 0010's functions this revision replaces (downgrade reinstalls them)."""

_OLD_JOURNAL = (
    "arvis_journal(text, text, text, text, text, integer, text, text, boolean, text, text,"
    " boolean, boolean, text, text, text, text, text, text[], text, boolean, text, text,"
    " text, boolean)"
)
_NEW_JOURNAL = "arvis_journal(arvis_journal_step)"
_RESOLVED_0006 = (
    "boundary IS NULL OR boundary IN ('EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_NOT_STARTED')"
)
_TRIGGERS_0010 = (
    """
    CREATE OR REPLACE TRIGGER tr_journal_entries_notify AFTER INSERT ON journal_entries
    FOR EACH ROW WHEN (NEW.kind = 'resolution'
        OR NEW.boundary IN ('EFFECT_STARTED', 'EFFECT_STATE_UNKNOWN'))
    EXECUTE FUNCTION arvis_on_entry()""",
    """
    CREATE OR REPLACE TRIGGER tr_confirmations_requested AFTER INSERT ON confirmations
    FOR EACH ROW EXECUTE FUNCTION arvis_on_confirmation()""",
    """
    CREATE OR REPLACE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
        (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
        OR (OLD.state = 'CONSUMED' AND NEW.state IN ('PENDING', 'APPROVED'))
        OR NEW.state IN ('DENIED', 'EXPIRED')))
    EXECUTE FUNCTION arvis_on_confirmation()""",
)
"""The triggers as revisions 0006 and 0010 defined them inline."""


def statements(path: Path) -> list[str]:
    """The statements of one file: functions end with ``$$;``, anything else with ``;``
    at the end of a line."""
    text = path.read_text()
    if "$$" in text:
        return [part + "$$" for part in text.split("$$;")[:-1]]
    return [part for part in text.split(";\n") if part.strip(" \n") and "CREATE" in part]


def _execute(path: Path) -> None:
    for statement in statements(path):
        op.execute(statement)


def _resolved_check(condition: str) -> None:
    op.execute(f"""
        ALTER TABLE resolutions DROP CONSTRAINT ck_resolutions_boundary_resolved,
            ADD CONSTRAINT ck_resolutions_boundary_resolved CHECK ({condition})""")


def upgrade() -> None:
    op.execute(f"DROP FUNCTION {_OLD_JOURNAL}")
    for name in FUNCTIONS:
        _execute(_FROZEN / f"{name}.sql")
    _execute(_FROZEN / f"{TRIGGERS}.sql")
    _resolved_check("boundary IS NULL OR arvis_resolved(boundary)")


def downgrade() -> None:
    _resolved_check(_RESOLVED_0006)
    for trigger in _TRIGGERS_0010:
        op.execute(trigger)
    op.execute(f"DROP FUNCTION {_NEW_JOURNAL}")
    op.execute("DROP TYPE arvis_journal_step")
    for name in CHANGED:
        _execute(_PREVIOUS / f"{name}.sql")
    op.execute("DROP FUNCTION arvis_resolved(text)")
    op.execute("DROP FUNCTION arvis_uncertain(text)")

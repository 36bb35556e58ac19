"""The journal step as one flat function (migrations/sql/0003_functions.sql).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 13:40:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQL = Path(__file__).resolve().parents[1] / "sql"

# Every function as revision 0001 created it, in an order that drops callers first.
_FUNCTIONS_0001 = (
    "arvis_admit",
    "arvis_journal_execution",
    "arvis_settle_attempt",
    "arvis_journal_append",
    "arvis_entry_hash",
)


def _statements(name: str) -> list[str]:
    """The CREATE FUNCTION statements of a file, one per call (each ends in $$;)."""
    parts = (_SQL / name).read_text().split("$$;")
    return [part + "$$" for part in parts[:-1]]


def upgrade() -> None:
    for function in ("arvis_journal_execution", "arvis_settle_attempt", "arvis_journal_append"):
        op.execute(f"DROP FUNCTION {function}")
    for statement in _statements("0003_functions.sql"):
        op.execute(statement)


def downgrade() -> None:
    for function in _FUNCTIONS_0001:
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    for statement in _statements("0001_functions.sql"):
        op.execute(statement)

"""Durable budgets and the deciding policy of every attempt (issue 18).

- ``budget_usage``: one row per (tenant, budget, scope, window). ``arvis_admit``
  raises its ``used`` only while it stays within the budget's limit (a conditional
  upsert in the admitting statement), so the limit holds exactly under any
  concurrency; ``arvis_journal`` lowers it again when it settles an attempt whose
  effect provably did not start. Primary key leads with ``tenant_id``; no sequence.
- ``attempts.budgets``: what an attempt in flight was charged (NULL: no budget
  applied, the common case, which writes nothing more), for its settling entry.
- ``attempts.policy``: which policy authorized the attempt and the ids that decided,
  so an entry written by recovery records them as one written by the owner does.
- ``arvis_admit`` and ``arvis_journal`` take the new parameters (their text is
  arvis/store/sql/; the texts before it are frozen under arvis/migrations/sql/0006/
  (arvis_admit) and arvis/migrations/sql/0005/ (arvis_journal)).

Downgrade drops the budgets' use (the windows' counts are lost) and the two columns,
and reinstalls the functions as revision 0006 left them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from arvis.store.migrate import FUNCTIONS_DIR

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = FUNCTIONS_DIR
# What the revision before this one installed: 0006's arvis_admit, 0005's arvis_journal.
_PREVIOUS = {
    "arvis_admit": _MIGRATIONS / "sql" / "0006" / "arvis_admit.sql",
    "arvis_journal": _MIGRATIONS / "sql" / "0005" / "arvis_journal.sql",
}
CHANGED = ("arvis_admit", "arvis_journal")
# Functions a later revision changed: this revision installs its own text, frozen.
_FROZEN = _MIGRATIONS / "sql" / "0007"


def function_text(name: str) -> Path:
    """This revision's text of ``name``: frozen under sql/0007/ once a later revision
    changed it (0010 changed both), else the current file."""
    frozen = _FROZEN / f"{name}.sql"
    return frozen if frozen.is_file() else _CURRENT / f"{name}.sql"


def _drop(name: str) -> None:
    # Every overload: a signature that grew a parameter is a new function, not a
    # replacement, and both must not stay callable.
    op.execute(f"""
        DO $$
        DECLARE f regprocedure;
        BEGIN
            FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = '{name}'
                       AND pronamespace = current_schema()::regnamespace LOOP
                EXECUTE 'DROP FUNCTION ' || f;
            END LOOP;
        END
        $$""")


def upgrade() -> None:
    op.execute("""
        CREATE TABLE budget_usage (
            tenant_id text NOT NULL,
            budget text NOT NULL,
            scope_key text NOT NULL,
            window_start timestamptz NOT NULL,
            used numeric NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_budget_usage PRIMARY KEY (tenant_id, budget, scope_key, window_start),
            CONSTRAINT ck_budget_usage_tenant_present CHECK (tenant_id <> ''),
            CONSTRAINT ck_budget_usage_used_natural CHECK (used >= 0)
        )""")
    op.execute("ALTER TABLE attempts ADD COLUMN policy jsonb, ADD COLUMN budgets jsonb")
    for name in CHANGED:
        _drop(name)
        op.execute(function_text(name).read_text())


def downgrade() -> None:
    for name in CHANGED:
        _drop(name)
        op.execute(_PREVIOUS[name].read_text())
    op.execute("ALTER TABLE attempts DROP COLUMN policy, DROP COLUMN budgets")
    op.execute("DROP TABLE budget_usage")

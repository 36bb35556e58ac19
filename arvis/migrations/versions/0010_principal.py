"""Runs bound to their principal; decisions keep the plan they were decided under (issue 23).

- ``runs.principal_id``: the principal a run is bound to (DESIGN §10 "A decision belongs
  to its principal"). ``arvis_bind`` sets it when it creates a run, from the sealed
  context of the step (admission, consent) or the refusal's principal, and answers
  ``identity_mismatch`` — writing nothing — to every later step of another principal.
  Existing runs are bound to the principal of their earliest recorded step: a journal
  entry that names one (a refusal's ``principal_id``, an execution's or recovery's sealed
  context, revision 0005 on), a confirmation's or an attempt in flight's context,
  whichever was recorded first. A run that names no principal anywhere (nothing of it
  records one) stays NULL and is bound by its next syscall.
- ``arvis_bind`` no longer refuses a step under another plan than the run's first one
  (``plan_mismatch``): every decision is decided under the caller's current plan, and one
  with history under what its latest attempt was (Python decides it on the history,
  which the statements re-check). ``arvis_admit`` records the attempt's own plan.
- ``arvis_admit``, ``arvis_journal`` and ``arvis_request_consent`` pass the principal to
  ``arvis_bind`` (from the arguments they already take) and answer ``identity_mismatch``.
  Their texts before it are frozen under arvis/migrations/sql/0007/ (arvis_admit,
  arvis_journal), sql/0006/ (arvis_request_consent) and sql/0005/ (arvis_bind).

Downgrade drops the column and reinstalls the functions as revisions 0005-0007 left them.

Revision ID: 0010_principal
Revises: 0009
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0010_principal"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = _MIGRATIONS.parent / "store" / "sql"
# In dependency order; what the revisions before this one installed.
_PREVIOUS = {
    "arvis_bind": _MIGRATIONS / "sql" / "0005" / "arvis_bind.sql",
    "arvis_admit": _MIGRATIONS / "sql" / "0007" / "arvis_admit.sql",
    "arvis_journal": _MIGRATIONS / "sql" / "0007" / "arvis_journal.sql",
    "arvis_request_consent": _MIGRATIONS / "sql" / "0006" / "arvis_request_consent.sql",
}

# The earliest recorded principal of each run. Refusals name it at the top of their
# body; executions and recoveries in their sealed context (entries from before
# revision 0005 have none); confirmations and attempts in flight in their context.
_BACKFILL = """
    UPDATE runs r SET principal_id = first.principal_id
      FROM (
        SELECT DISTINCT ON (tenant_id, run_id) tenant_id, run_id, principal_id
          FROM (
            SELECT tenant_id, run_id, recorded_at AS at, position AS ord,
                   CASE WHEN kind = 'refusal' THEN body::jsonb ->> 'principal_id'
                        ELSE body::jsonb -> 'context' ->> 'principal_id' END AS principal_id
              FROM journal_entries WHERE kind IN ('execution', 'refusal', 'recovery')
            UNION ALL
            SELECT tenant_id, run_id, created_at, 0, context ->> 'principal_id'
              FROM confirmations
            UNION ALL
            SELECT tenant_id, run_id, admitted_at, 0, context ->> 'principal_id'
              FROM attempts
          ) recorded
         WHERE coalesce(principal_id, '') <> ''
         ORDER BY tenant_id, run_id, at, ord
      ) first
     WHERE r.tenant_id = first.tenant_id AND r.run_id = first.run_id
"""


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
    op.execute("ALTER TABLE runs ADD COLUMN principal_id text")
    op.execute(_BACKFILL)
    for name in _PREVIOUS:
        _drop(name)
        op.execute((_CURRENT / f"{name}.sql").read_text())


def downgrade() -> None:
    for name, path in _PREVIOUS.items():
        _drop(name)
        op.execute(path.read_text())
    op.execute("ALTER TABLE runs DROP COLUMN principal_id")

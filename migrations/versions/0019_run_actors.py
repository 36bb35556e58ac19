"""The agents that acted for each run's principal, findable by run (issues 26, 27).

- ``ix_journal_entries_actor``: a partial index of the journal on (tenant, run, the
  agent the entry's body names as acting for its principal), holding only bodies that
  may name one. The runs list reads each run's distinct actors from it, one index probe
  per actor, and filters by an actor the same way; a run nobody acted for costs nothing,
  and a long run of one agent costs two probes instead of a read of its whole journal.
  It indexes what the entries already record (a refusal's ``actor``, a consent decision's
  ``requested_actor``, the sealed context's ``actor``): nothing is rewritten, no writer
  changes. ``arvis.store.columns.entry_actor`` is its expression; the text is frozen here.

Downgrade drops the index; no row changes.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ENTRY_ACTOR = (
    "(CASE WHEN kind = 'refusal' THEN body::json #>> '{actor,principal_id}'"
    " WHEN kind = 'confirmation' THEN body::json ->> 'requested_actor'"
    " ELSE body::json #>> '{context,actor,principal_id}' END)"
)
NAMES_AN_ACTOR = "strpos(body, 'actor\":') > 0"


def upgrade() -> None:
    op.execute(
        f"CREATE INDEX ix_journal_entries_actor ON journal_entries (tenant_id, run_id,"
        f" {ENTRY_ACTOR}) WHERE {NAMES_AN_ACTOR}"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_journal_entries_actor")

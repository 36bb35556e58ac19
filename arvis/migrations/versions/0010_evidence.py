"""A run's evidence found broken, kept on the run (issue 23).

- ``runs.evidence_broken_at`` and ``runs.evidence_fault``: the first position at which
  the run's evidence (its chain, its signed checkpoints, the witness) was found not to
  hold, and what was found, by whom and when. Set once, by the checkpointer (a head
  that does not descend from the one it signed last), by ``verify`` and replay with the
  deployment's own key and witness, and by a deduplicated answer whose entry does not
  recompute. Deduplicated answers and replays of a flagged run are refused
  (``chain_broken``). NULL: nothing was found.

No server-side function changes: the journal statement never reads or writes them.
Downgrade drops the two columns (what was found is lost; the witness and the log keep
their account).

Revision ID: 0010_evidence
Revises: 0009
Create Date: 2026-12-02 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010_evidence"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE runs ADD COLUMN evidence_broken_at bigint, ADD COLUMN evidence_fault text"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN evidence_fault, DROP COLUMN evidence_broken_at")

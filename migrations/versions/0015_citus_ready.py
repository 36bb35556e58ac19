"""The lifecycle's functions as Citus can run them, and a row lock on the run (issue 28).

ARVIS can be sharded by tenant on Citus (docs/scaling.md): ``arvis migrate --distribute``
distributes this schema (arvis/store/distribution.py). The functions change so that the
same text runs on plain PostgreSQL and, pushed down to a tenant's worker, on Citus:

- The run's lock is a row lock on the run's row (``SELECT … FOR NO KEY UPDATE``), no
  longer a transaction-scoped advisory lock: an advisory lock is held on the node that
  runs the function only, so on Citus a call pushed down to a worker and one run on the
  coordinator did not exclude each other; the row lives in the run's shard. A run's
  first step inserts its row with ``ON CONFLICT DO NOTHING`` and a concurrent first step
  waits for it, then locks it (``arvis_bind``; ``arvis_journal``, ``arvis_approve`` and
  ``arvis_resolve`` lock the row directly).
- ``arvis_journal`` takes the tenant as its first argument (``p_tenant``, which must
  equal the step's ``tenant``): Citus routes a call by a distribution argument of the
  shard key's type, never by a field of a record.
- No expression Citus's planner refuses on a distributed table: times cast once into a
  variable instead of inside a ``CASE`` (``arvis_journal``, ``arvis_resolve``), the
  approver groups read into a variable instead of a subquery in ``INSERT … VALUES``
  (``arvis_request_consent``, ``arvis_resolve``), and a budget charge as ``INSERT …
  VALUES`` with its time from ``excluded`` and the limit of a lone charge checked first
  (``arvis_admit``; the conditional upsert is unchanged).

- The group-commit batch (revision 0012) follows: ``arvis_journal_batch`` calls the new
  ``arvis_journal``, and ``arvis_lock_runs``'s advisory locks only order batches now (the
  row lock excludes).

No table changes. The texts this revision installs are frozen under
``arvis/migrations/sql/0015/``; downgrade reinstalls revision 0011's (sql/0011/) and
0010's (sql/0010/: ``arvis_bind``, ``arvis_admit``).

Revision ID: 0015
Revises: 0012
Create Date: 2026-12-02 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0015"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQL = Path(__file__).resolve().parents[1] / "sql"
_FROZEN = _SQL / "0015"

FUNCTIONS = (
    "arvis_bind",
    "arvis_admit",
    "arvis_journal",
    "arvis_journal_batch",
    "arvis_lock_runs",
    "arvis_approve",
    "arvis_resolve",
    "arvis_request_consent",
)
PREVIOUS = {
    "arvis_bind": _SQL / "0010",
    "arvis_admit": _SQL / "0010",
    "arvis_journal": _SQL / "0011",
    "arvis_journal_batch": _SQL / "0012",
    "arvis_lock_runs": _SQL / "0012",
    "arvis_approve": _SQL / "0011",
    "arvis_resolve": _SQL / "0011",
    "arvis_request_consent": _SQL / "0011",
}
"""Where the texts this revision replaces are frozen."""

_OLD_JOURNAL = "arvis_journal(arvis_journal_step)"
_NEW_JOURNAL = "arvis_journal(text, arvis_journal_step)"


def upgrade() -> None:
    op.execute(f"DROP FUNCTION {_OLD_JOURNAL}")
    for name in FUNCTIONS:
        op.execute((_FROZEN / f"{name}.sql").read_text())


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {_NEW_JOURNAL}")
    for name, folder in PREVIOUS.items():
        op.execute((folder / f"{name}.sql").read_text())

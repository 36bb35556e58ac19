"""Whether an attempt is the next one is one definition (issue 24).

- ``arvis_next_attempt(tenant, key, attempt)``: true when no attempt of the decision is
  in flight and its last journaled attempt is ``attempt - 1``. ``arvis_admit`` (a
  decision already bound) and ``arvis_journal`` (an entry under an attempt number that
  settles nothing) each wrote this check out themselves, in two forms; both now call it.
  On Citus the new function is created on every node with the coordinator's
  ``CREATE FUNCTION`` (Citus propagates it), so the distributed steps find it on the
  tenant's worker. The texts this revision installs are frozen under ``sql/0020/``.

No row changes. Downgrade reinstalls revision 0015's ``arvis_admit`` and
``arvis_journal`` and drops the function.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQL = Path(__file__).resolve().parents[1] / "sql"

FUNCTIONS = ("arvis_next_attempt", "arvis_admit", "arvis_journal")
"""In this order: the steps call the function."""
PREVIOUS = {"arvis_admit": _SQL / "0015", "arvis_journal": _SQL / "0015"}
"""Where the texts this revision replaces are frozen."""


def upgrade() -> None:
    for name in FUNCTIONS:
        op.execute((_SQL / "0020" / f"{name}.sql").read_text())


def downgrade() -> None:
    for name, folder in PREVIOUS.items():
        op.execute((folder / f"{name}.sql").read_text())
    op.execute("DROP FUNCTION arvis_next_attempt(text, text, integer)")

"""When each API key was last used (issue 27).

- ``api_keys.last_used_at``: the console's keys page shows it. It is written after a
  request authenticated, off the request's own statements and at most once a minute
  per key (:mod:`arvis.store.keys`), so it says "used within the last minute or so",
  never more precisely. NULL: not used since this revision.

Downgrade drops the column; no other row changes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN last_used_at")

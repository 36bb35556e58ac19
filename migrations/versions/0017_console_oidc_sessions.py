"""Console sessions of people signed in through an OpenID provider (issue 26).

- ``console_sessions.key_id`` becomes nullable and ``console_sessions.identity`` (jsonb)
  is added: a session is either of an API key (looked up live, as before) or of a
  verified ID token, whose identity (tenant, principal, issuer, roles, groups) is
  stored as it was at sign-in. Exactly one of the two is set.

Downgrade deletes the sessions of ID tokens (their people sign in again), then drops
the column and makes ``key_id`` required again.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 20:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE console_sessions ALTER COLUMN key_id DROP NOT NULL")
    op.execute("ALTER TABLE console_sessions ADD COLUMN identity jsonb")
    op.execute(
        "ALTER TABLE console_sessions ADD CONSTRAINT ck_console_sessions_key_or_identity"
        " CHECK ((key_id IS NULL) <> (identity IS NULL))"
    )


def downgrade() -> None:
    op.execute("DELETE FROM console_sessions WHERE key_id IS NULL")
    op.execute("ALTER TABLE console_sessions DROP CONSTRAINT ck_console_sessions_key_or_identity")
    op.execute("ALTER TABLE console_sessions DROP COLUMN identity")
    op.execute("ALTER TABLE console_sessions ALTER COLUMN key_id SET NOT NULL")

"""Operator console sessions (issue 17).

- ``console_sessions``: one row per signed-in browser. The cookie carries a random
  token; only its SHA-256 is stored (``token_hash``), so a read of the table signs
  no one in. A session belongs to the API key it was exchanged for: revoking the key
  ends it (the lookup joins the live key), deleting the key deletes it. Primary key
  leads with ``tenant_id``. A cookie names no tenant, so the lookup is by
  ``token_hash`` alone, through a plain index: the digest of a random 256-bit token
  does not collide, and no key spans tenants (the table stays shardable by tenant).
- ``ix_runs_tenant_id_created_at``: the console lists a tenant's runs newest first.

Downgrade drops both; every browser is signed out.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE console_sessions (
            tenant_id text NOT NULL,
            token_hash text NOT NULL,
            key_id text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            CONSTRAINT pk_console_sessions PRIMARY KEY (tenant_id, token_hash),
            CONSTRAINT ck_console_sessions_tenant_present CHECK (tenant_id <> ''),
            CONSTRAINT ck_console_sessions_token_hash_digest CHECK (length(token_hash) = 64)
        )""")
    op.execute("CREATE INDEX ix_console_sessions_token_hash ON console_sessions (token_hash)")
    op.execute("CREATE INDEX ix_console_sessions_expires_at ON console_sessions (expires_at)")
    op.execute("CREATE INDEX ix_runs_tenant_id_created_at ON runs (tenant_id, created_at)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_runs_tenant_id_created_at")
    op.execute("DROP TABLE console_sessions")

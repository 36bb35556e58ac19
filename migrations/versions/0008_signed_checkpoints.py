"""Signed checkpoints of each run's chain head (issue 19).

- ``run_checkpoints``: one row per (tenant, run, length): the head hash signed, when,
  the signing key's id and the Ed25519 signature. The key itself is never in the
  database. Primary key and foreign key lead with ``tenant_id``; no sequence.

No server-side function changes: checkpoints are written off the governed path.
Downgrade drops the table (the checkpoints are lost; a witness keeps its copy).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE run_checkpoints (
            tenant_id text NOT NULL,
            run_id text NOT NULL,
            length bigint NOT NULL,
            head_hash text NOT NULL,
            signed_at timestamptz NOT NULL,
            key_id text NOT NULL,
            signature text NOT NULL,
            CONSTRAINT pk_run_checkpoints PRIMARY KEY (tenant_id, run_id, length),
            CONSTRAINT fk_run_checkpoints_runs FOREIGN KEY (tenant_id, run_id)
                REFERENCES runs (tenant_id, run_id),
            CONSTRAINT ck_run_checkpoints_tenant_present CHECK (tenant_id <> ''),
            CONSTRAINT ck_run_checkpoints_length_positive CHECK (length >= 1)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE run_checkpoints")

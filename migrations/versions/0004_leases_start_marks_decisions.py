"""Lease holders, durable start marks and consent decision times (issue 12).

- ``instance_leases.holder``: the random token of the process holding a lease name.
  A process claims a name only while it is free (never held, released, or
  expired) and beats only while it is still the holder, so two processes can
  never both believe they hold one name (DESIGN §6).
- ``intents.started_at``: set when the tool reports that its effect started, in a
  statement of its own before the tool goes on; recovery journals such an
  attempt ``EFFECT_STARTED`` rather than ``EFFECT_STATE_UNKNOWN`` (DESIGN §1).
- ``confirmations.decided_at``: when an approver decided (DESIGN §4).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("instance_leases", sa.Column("holder", sa.Text(), nullable=True))
    op.add_column("intents", sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "confirmations", sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("confirmations", "decided_at")
    op.drop_column("intents", "started_at")
    op.drop_column("instance_leases", "holder")

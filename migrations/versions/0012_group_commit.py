"""Group commit (issue 25): one admission statement and one journaling statement
carry every step of a tenant that queued while its previous batch was in flight.

- ``arvis_admit_batch(tenant, jsonb)``: admits a batch of attempts through ``arvis_admit``,
  one answer row per item in order; a budget refusal (SQLSTATE AR010) is caught
  around the one item that carries charges and answered ``budget_exceeded``, so it
  undoes only that item's writes.
- ``arvis_journal_batch(tenant, jsonb)``: appends a batch of ``arvis_journal_step`` records
  through ``arvis_journal``, one answer row per item in order.
- Each takes the tenant first, so a Citus deployment can delegate the call to the
  tenant's shard (``create_distributed_function(..., 'p_tenant')``).
- ``arvis_lock_runs(tenant, jsonb)``: takes every run lock a batch needs first, in the lock
  key's order, so batches never deadlock on each other or on lone steps.

No table changes; ``arvis_admit`` and ``arvis_journal`` are unchanged (the batch
functions call them). The texts are frozen under ``arvis/migrations/sql/0012/``.
Downgrade drops the three functions.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FROZEN = Path(__file__).resolve().parents[1] / "sql" / "0012"

# In dependency order: the lock before the batches that take it.
FUNCTIONS = ("arvis_lock_runs", "arvis_admit_batch", "arvis_journal_batch")
_SIGNATURES = (
    "arvis_journal_batch(text, jsonb)",
    "arvis_admit_batch(text, jsonb, boolean)",
    "arvis_lock_runs(text, jsonb)",
)


def upgrade() -> None:
    for name in FUNCTIONS:
        op.execute((_FROZEN / f"{name}.sql").read_text())


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"DROP FUNCTION {signature}")

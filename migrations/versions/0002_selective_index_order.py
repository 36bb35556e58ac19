"""Secondary indexes lead with their selective column, not with tenant_id.

Every hot-path lookup is by a table's primary key, ``(tenant_id, <id>)``. While
a secondary index also began with ``tenant_id``, the planner could not tell the
two apart on a new (small, never analyzed) table: a session's cached generic
plan, and every foreign-key check's, then used the secondary index and filtered
the whole tenant's rows, for the life of the connection. Admission on a new
database slowed linearly with its row count (docs/benchmarks.md). Leading with
the selective column leaves the primary key the only index that matches those
lookups. Uniqueness is unchanged: the same column sets are unique, except the
one-unsettled-attempt index, now on the key alone (a key already names its tenant).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 13:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, old name, old columns, new name, new columns)
UNIQUE_CONSTRAINTS = (
    (
        "actions",
        "uq_actions_tenant_id_run_id_causal_id",
        ["tenant_id", "run_id", "causal_id"],
        "uq_actions_run_id_causal_id_tenant_id",
        ["run_id", "causal_id", "tenant_id"],
    ),
    (
        "capabilities",
        "uq_capabilities_tenant_id_idempotency_key_attempt",
        ["tenant_id", "idempotency_key", "attempt"],
        "uq_capabilities_idempotency_key_attempt_tenant_id",
        ["idempotency_key", "attempt", "tenant_id"],
    ),
    (
        "intents",
        "uq_intents_tenant_id_idempotency_key_attempt",
        ["tenant_id", "idempotency_key", "attempt"],
        "uq_intents_idempotency_key_attempt_tenant_id",
        ["idempotency_key", "attempt", "tenant_id"],
    ),
    (
        "confirmations",
        "uq_confirmations_tenant_id_idempotency_key",
        ["tenant_id", "idempotency_key"],
        "uq_confirmations_idempotency_key_tenant_id",
        ["idempotency_key", "tenant_id"],
    ),
)

# (table, name, old columns, new columns, unique, predicate); the names stay.
INDEXES = (
    (
        "intents",
        "uq_intents_one_unsettled_attempt",
        ["tenant_id", "idempotency_key"],
        # The key is a digest over the tenant among others (DESIGN §4), so it is
        # unique across tenants; with tenant_id in this partial index the planner
        # still preferred it to the primary key for "this intent, if unsettled".
        ["idempotency_key"],
        True,
        "NOT settled",
    ),
    (
        "journal_entries",
        "uq_journal_entries_one_result_per_attempt",
        ["tenant_id", "idempotency_key", "attempt"],
        ["idempotency_key", "attempt", "tenant_id"],
        True,
        "attempt IS NOT NULL",
    ),
)


CONFIRMATIONS_INDEX = "ix_confirmations_tenant_id_state_confirmation_id"
CONFIRMATIONS_COLUMNS = ["tenant_id", "state", "confirmation_id"]


def upgrade() -> None:
    for table, old, _, new, columns in UNIQUE_CONSTRAINTS:
        op.drop_constraint(old, table, type_="unique")
        op.create_unique_constraint(new, table, columns)
    for table, name, _, columns, unique, where in INDEXES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, columns, unique=unique, postgresql_where=sa.text(where))
    # Listing a tenant's confirmations by state, in id order; with the id in the
    # index, "this confirmation, if RESERVED" is an exact lookup here as well.
    op.drop_index("ix_confirmations_tenant_id_state", table_name="confirmations")
    op.create_index(CONFIRMATIONS_INDEX, "confirmations", CONFIRMATIONS_COLUMNS)


def downgrade() -> None:
    op.drop_index(CONFIRMATIONS_INDEX, table_name="confirmations")
    op.create_index("ix_confirmations_tenant_id_state", "confirmations", ["tenant_id", "state"])
    for table, name, columns, _, unique, where in INDEXES:
        op.drop_index(name, table_name=table)
        op.create_index(name, table, columns, unique=unique, postgresql_where=sa.text(where))
    for table, old, columns, new, _ in UNIQUE_CONSTRAINTS:
        op.drop_constraint(new, table, type_="unique")
        op.create_unique_constraint(old, table, columns)

"""The whole lifecycle schema of DESIGN §1/§5.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 10:17:09.348157
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


FUNCTIONS = (
    "arvis_admit",
    "arvis_journal_execution",
    "arvis_settle_attempt",
    "arvis_journal_append",
    "arvis_entry_hash",
)


def upgrade() -> None:
    # Audit receipts' durable positions: global, never reused.
    op.execute(sa.schema.CreateSequence(sa.Sequence("receipt_position_seq")))
    op.create_table(
        "api_keys",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("key_id", sa.Text(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("roles", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("secret_hash", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "cardinality(roles) >= 1 AND roles <@ ARRAY['agent','approver','auditor','admin']::text[]",
            name=op.f("ck_api_keys_roles_known"),
        ),
        sa.CheckConstraint("principal <> ''", name=op.f("ck_api_keys_principal_present")),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_api_keys_tenant_present")),
        sa.PrimaryKeyConstraint("tenant_id", "key_id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_id", name=op.f("uq_api_keys_key_id")),
    )
    op.create_table(
        "instance_leases",
        sa.Column("instance_id", sa.Text(), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "last_beat_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.CheckConstraint("instance_id <> ''", name=op.f("ck_instance_leases_instance_present")),
        sa.PrimaryKeyConstraint("instance_id", name=op.f("pk_instance_leases")),
    )
    op.create_table(
        "tool_plans",
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("definitions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("length(plan_id) = 64", name=op.f("ck_tool_plans_plan_id_digest")),
        sa.PrimaryKeyConstraint("plan_id", name=op.f("pk_tool_plans")),
    )
    op.create_table(
        "runs",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("journal_length", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("journal_head", sa.Text(), nullable=False),
        sa.Column(
            "audit_incomplete", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
        sa.Column("audit_incomplete_reason", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_runs_tenant_present")),
        sa.CheckConstraint("journal_length >= 0", name=op.f("ck_runs_journal_length_natural")),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["tool_plans.plan_id"], name=op.f("fk_runs_tool_plans")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "run_id", name=op.f("pk_runs")),
    )
    op.create_table(
        "actions",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("causal_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("payload_digest", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("in_flight", sa.Boolean(), nullable=False),
        sa.Column("last_boundary", sa.Text(), nullable=True),
        sa.Column("last_retryable", sa.Boolean(), nullable=True),
        sa.Column("last_position", sa.BigInteger(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "last_boundary IS NULL OR last_boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED', 'EFFECT_STARTED', 'EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_STATE_UNKNOWN')",
            name=op.f("ck_actions_last_boundary_known"),
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_actions_tenant_present")),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_actions_attempts_natural")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "run_id"], ["runs.tenant_id", "runs.run_id"], name=op.f("fk_actions_runs")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "idempotency_key", name=op.f("pk_actions")),
        sa.UniqueConstraint(
            "tenant_id", "run_id", "causal_id", name=op.f("uq_actions_tenant_id_run_id_causal_id")
        ),
    )
    op.create_table(
        "confirmations",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("confirmation_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("causal_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("payload_digest", sa.Text(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("context", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("decision_reason", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "state IN ('PENDING', 'APPROVED', 'RESERVED', 'CONSUMED', 'DENIED', 'EXPIRED')",
            name=op.f("ck_confirmations_state_known"),
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_confirmations_tenant_present")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "run_id"],
            ["runs.tenant_id", "runs.run_id"],
            name=op.f("fk_confirmations_runs"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "confirmation_id", name=op.f("pk_confirmations")),
        sa.UniqueConstraint(
            "tenant_id", "idempotency_key", name=op.f("uq_confirmations_tenant_id_idempotency_key")
        ),
    )
    op.create_index(
        "ix_confirmations_tenant_id_state", "confirmations", ["tenant_id", "state"], unique=False
    )
    op.create_table(
        "journal_entries",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("causal_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("intent_id", sa.Text(), nullable=True),
        sa.Column("boundary", sa.Text(), nullable=True),
        # The canonical (RFC 8785) body text, byte for byte what the chain hashes.
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("prev_hash", sa.Text(), nullable=False),
        sa.Column("entry_hash", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "boundary IS NULL OR boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED', 'EFFECT_STARTED', 'EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_STATE_UNKNOWN')",
            name=op.f("ck_journal_entries_boundary_known"),
        ),
        sa.CheckConstraint(
            "kind IN ('execution', 'refusal', 'recovery', 'confirmation')",
            name=op.f("ck_journal_entries_kind_known"),
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_journal_entries_tenant_present")),
        sa.CheckConstraint("position >= 1", name=op.f("ck_journal_entries_position_positive")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "run_id"],
            ["runs.tenant_id", "runs.run_id"],
            name=op.f("fk_journal_entries_runs"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "run_id", "position", name=op.f("pk_journal_entries")),
    )
    op.create_index(
        "uq_journal_entries_one_result_per_attempt",
        "journal_entries",
        ["tenant_id", "idempotency_key", "attempt"],
        unique=True,
        postgresql_where=sa.text("attempt IS NOT NULL"),
    )
    op.create_table(
        "capabilities",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("capability_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("manager_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("receipt_position", sa.BigInteger(), nullable=True),
        sa.Column("revoke_reason", sa.Text(), nullable=True),
        sa.Column(
            "minted_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "state IN ('MINTED', 'ACTIVE', 'CONSUMED', 'REVOKED')",
            name=op.f("ck_capabilities_state_known"),
        ),
        sa.CheckConstraint(
            "state IN ('MINTED', 'REVOKED') OR receipt_position IS NOT NULL",
            name=op.f("ck_capabilities_active_has_receipt"),
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_capabilities_tenant_present")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "idempotency_key"],
            ["actions.tenant_id", "actions.idempotency_key"],
            name=op.f("fk_capabilities_actions"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "capability_id", name=op.f("pk_capabilities")),
        sa.UniqueConstraint("receipt_position", name=op.f("uq_capabilities_receipt_position")),
        sa.UniqueConstraint(
            "tenant_id",
            "idempotency_key",
            "attempt",
            name=op.f("uq_capabilities_tenant_id_idempotency_key_attempt"),
        ),
    )
    op.create_table(
        "intents",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("intent_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("causal_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("plan_id", sa.Text(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("payload_digest", sa.Text(), nullable=False),
        sa.Column("capability_id", sa.Text(), nullable=False),
        sa.Column("commitment", sa.Text(), nullable=False),
        sa.Column("receipt_position", sa.BigInteger(), nullable=False),
        sa.Column("context", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("instance_id", sa.Text(), nullable=False),
        sa.Column("confirmation_id", sa.Text(), nullable=True),
        sa.Column("settled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("boundary", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "boundary IS NULL OR boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED', 'EFFECT_STARTED', 'EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_STATE_UNKNOWN')",
            name=op.f("ck_intents_boundary_known"),
        ),
        sa.CheckConstraint("tenant_id <> ''", name=op.f("ck_intents_tenant_present")),
        sa.CheckConstraint(
            "settled = (settled_at IS NOT NULL)", name=op.f("ck_intents_settled_has_time")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "capability_id"],
            ["capabilities.tenant_id", "capabilities.capability_id"],
            name=op.f("fk_intents_capabilities"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "run_id"], ["runs.tenant_id", "runs.run_id"], name=op.f("fk_intents_runs")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "intent_id", name=op.f("pk_intents")),
        sa.UniqueConstraint("receipt_position", name=op.f("uq_intents_receipt_position")),
        sa.UniqueConstraint(
            "tenant_id",
            "idempotency_key",
            "attempt",
            name=op.f("uq_intents_tenant_id_idempotency_key_attempt"),
        ),
    )
    op.create_index(
        "uq_intents_one_unsettled_attempt",
        "intents",
        ["tenant_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("NOT settled"),
    )
    for statement in _function_statements():
        op.execute(statement)


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    op.drop_index(
        "uq_intents_one_unsettled_attempt",
        table_name="intents",
        postgresql_where=sa.text("NOT settled"),
    )
    op.drop_table("intents")
    op.drop_table("capabilities")
    op.drop_index(
        "uq_journal_entries_one_result_per_attempt",
        table_name="journal_entries",
        postgresql_where=sa.text("attempt IS NOT NULL"),
    )
    op.drop_table("journal_entries")
    op.drop_index("ix_confirmations_tenant_id_state", table_name="confirmations")
    op.drop_table("confirmations")
    op.drop_table("actions")
    op.drop_table("runs")
    op.drop_table("tool_plans")
    op.drop_table("instance_leases")
    op.drop_table("api_keys")
    op.execute(sa.schema.DropSequence(sa.Sequence("receipt_position_seq")))


def _function_statements() -> list[str]:
    """The CREATE FUNCTION statements of this revision, one per call (each ends in $$;)."""
    text = (Path(__file__).resolve().parents[1] / "sql" / "0001_functions.sql").read_text()
    parts = text.split("$$;")
    return [part + "$$" for part in parts[:-1]]

"""One row per lifecycle step (issue 13; DESIGN §2 "the write set is the store's to choose").

Before: a governed call wrote nine rows (action, capability and two transitions,
intent with its receipt from a global sequence, journal entry, chain head, two
settles). After:

- ``decisions``: one row per decision, bound at its first contact: the run's causal id
  names it for ever (primary key ``(tenant, run, causal)``), and it keeps the frozen
  payload once. Replaces ``actions`` (whose mutable summary is now derived from the
  journal).
- ``attempts``: one row per attempt *in flight*: the capability minted, activated and
  consumed in the admission transaction (one row version, one time), the intent and
  its receipt. Primary key ``(tenant, idempotency key)``: at most one unsettled
  attempt per key. The journal entry that settles an attempt deletes its row in the
  same transaction; from then on the entry is its durable record. Replaces
  ``capabilities`` and ``intents``; recovery reads only unsettled rows.
- ``runs.receipts``: receipt positions count per run, not across tenants.
- ``journal_entries.retryable``: the retry table reads an attempt's advice from its entry.

Every write step is one server-side function, whose current text lives in one file
per function under ``arvis/store/sql/`` (this revision installs them). Upgrade keeps
every decision, every unsettled attempt and every chain; downgrade rebuilds the
0004 tables from them (receipt positions from a fresh global sequence).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from arvis.store.migrate import FUNCTIONS_DIR

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = FUNCTIONS_DIR
# In dependency order. When a later revision changes one of these, it first
# freezes this revision's text under arvis/migrations/sql/0005/ and points here.
FUNCTIONS = (
    "arvis_entry_hash",
    "arvis_bind",
    "arvis_admit",
    "arvis_journal",
    "arvis_request_consent",
)

_TENANT = "CONSTRAINT ck_{table}_tenant_present CHECK (tenant_id <> '')"


# Functions a later revision changed: this revision installs its own text, frozen.
_FROZEN = _MIGRATIONS / "sql" / "0005"


def function_text(name: str) -> str:
    """This revision's text of ``name``: frozen under sql/0005/ once a later revision
    changed it, else the current file."""
    frozen = _FROZEN / f"{name}.sql"
    return (frozen if frozen.is_file() else _CURRENT / f"{name}.sql").read_text()


def _install_current() -> None:
    for name in FUNCTIONS:
        op.execute(function_text(name))


def _statements(path: Path) -> list[str]:
    parts = path.read_text().split("$$;")
    return [part + "$$" for part in parts[:-1]]


def upgrade() -> None:
    op.execute(f"""
        CREATE TABLE decisions (
            tenant_id text NOT NULL,
            run_id text NOT NULL,
            causal_id text NOT NULL,
            idempotency_key text NOT NULL,
            tool text NOT NULL,
            payload_digest text NOT NULL,
            payload jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_decisions PRIMARY KEY (tenant_id, run_id, causal_id),
            CONSTRAINT fk_decisions_runs FOREIGN KEY (tenant_id, run_id)
                REFERENCES runs (tenant_id, run_id),
            {_TENANT.format(table="decisions")}
        )""")
    op.execute(f"""
        CREATE TABLE attempts (
            tenant_id text NOT NULL,
            idempotency_key text NOT NULL,
            attempt integer NOT NULL,
            run_id text NOT NULL,
            causal_id text NOT NULL,
            tool text NOT NULL,
            plan_id text NOT NULL,
            intent_id text NOT NULL,
            capability_id text NOT NULL,
            commitment text NOT NULL,
            receipt_position bigint NOT NULL,
            context jsonb NOT NULL,
            owner text NOT NULL,
            confirmation_id text,
            admitted_at timestamptz NOT NULL DEFAULT now(),
            started_at timestamptz,
            CONSTRAINT pk_attempts PRIMARY KEY (tenant_id, idempotency_key),
            CONSTRAINT fk_attempts_decisions FOREIGN KEY (tenant_id, run_id, causal_id)
                REFERENCES decisions (tenant_id, run_id, causal_id),
            {_TENANT.format(table="attempts")},
            CONSTRAINT ck_attempts_attempt_positive CHECK (attempt >= 1)
        )""")
    op.execute("ALTER TABLE runs ADD COLUMN receipts bigint NOT NULL DEFAULT 0")
    op.execute("ALTER TABLE journal_entries ADD COLUMN retryable boolean NOT NULL DEFAULT false")

    # The same facts, in the new rows.
    op.execute("""
        INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,
            payload_digest, payload, created_at)
        SELECT a.tenant_id, a.run_id, a.causal_id, a.idempotency_key, a.tool,
               a.payload_digest,
               coalesce(
                   (SELECT i.payload FROM intents i WHERE i.tenant_id = a.tenant_id
                      AND i.idempotency_key = a.idempotency_key LIMIT 1),
                   (SELECT c.payload FROM confirmations c WHERE c.tenant_id = a.tenant_id
                      AND c.idempotency_key = a.idempotency_key)),
               a.created_at
          FROM actions a""")
    op.execute("""
        INSERT INTO attempts (tenant_id, idempotency_key, attempt, run_id, causal_id, tool,
            plan_id, intent_id, capability_id, commitment, receipt_position, context, owner,
            confirmation_id, admitted_at, started_at)
        SELECT tenant_id, idempotency_key, attempt, run_id, causal_id, tool, plan_id,
               intent_id, capability_id, commitment, receipt_position, context, instance_id,
               confirmation_id, created_at, started_at
          FROM intents WHERE NOT settled""")
    op.execute("""
        UPDATE runs r SET receipts = m.receipts
          FROM (SELECT tenant_id, run_id, max(receipt_position) AS receipts
                  FROM intents GROUP BY tenant_id, run_id) m
         WHERE r.tenant_id = m.tenant_id AND r.run_id = m.run_id""")
    op.execute("""
        UPDATE journal_entries SET retryable = true
         WHERE attempt IS NOT NULL AND (body::jsonb ->> 'retryable')::boolean""")

    for function in ("arvis_admit", "arvis_journal_append", "arvis_entry_hash"):
        op.execute(f"DROP FUNCTION {function}")
    op.execute("DROP TABLE intents")
    op.execute("DROP TABLE capabilities")
    op.execute("DROP TABLE actions")
    op.execute("DROP SEQUENCE receipt_position_seq")
    _install_current()


def downgrade() -> None:
    for function in reversed(FUNCTIONS):
        op.execute(f"DROP FUNCTION {function}")
    op.execute("CREATE SEQUENCE receipt_position_seq")
    op.execute(f"""
        CREATE TABLE actions (
            tenant_id text NOT NULL,
            idempotency_key text NOT NULL,
            run_id text NOT NULL,
            causal_id text NOT NULL,
            tool text NOT NULL,
            payload_digest text NOT NULL,
            attempts integer NOT NULL,
            in_flight boolean NOT NULL,
            last_boundary text,
            last_retryable boolean,
            last_position bigint,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_actions PRIMARY KEY (tenant_id, idempotency_key),
            CONSTRAINT uq_actions_run_id_causal_id_tenant_id UNIQUE (run_id, causal_id, tenant_id),
            CONSTRAINT fk_actions_runs FOREIGN KEY (tenant_id, run_id)
                REFERENCES runs (tenant_id, run_id),
            CONSTRAINT ck_actions_attempts_natural CHECK (attempts >= 0),
            CONSTRAINT ck_actions_last_boundary_known CHECK (last_boundary IS NULL OR
                last_boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED', 'EFFECT_STARTED',
                                  'EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_STATE_UNKNOWN')),
            {_TENANT.format(table="actions")}
        )""")
    op.execute(f"""
        CREATE TABLE capabilities (
            tenant_id text NOT NULL,
            capability_id text NOT NULL,
            run_id text NOT NULL,
            idempotency_key text NOT NULL,
            attempt integer NOT NULL,
            manager_id text NOT NULL,
            state text NOT NULL,
            receipt_position bigint,
            revoke_reason text,
            minted_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_capabilities PRIMARY KEY (tenant_id, capability_id),
            CONSTRAINT uq_capabilities_idempotency_key_attempt_tenant_id
                UNIQUE (idempotency_key, attempt, tenant_id),
            CONSTRAINT uq_capabilities_receipt_position UNIQUE (receipt_position),
            CONSTRAINT fk_capabilities_actions FOREIGN KEY (tenant_id, idempotency_key)
                REFERENCES actions (tenant_id, idempotency_key),
            CONSTRAINT ck_capabilities_active_has_receipt CHECK (
                state IN ('MINTED', 'REVOKED') OR receipt_position IS NOT NULL),
            CONSTRAINT ck_capabilities_state_known CHECK (
                state IN ('MINTED', 'ACTIVE', 'CONSUMED', 'REVOKED')),
            {_TENANT.format(table="capabilities")}
        )""")
    op.execute(f"""
        CREATE TABLE intents (
            tenant_id text NOT NULL,
            intent_id text NOT NULL,
            run_id text NOT NULL,
            causal_id text NOT NULL,
            idempotency_key text NOT NULL,
            attempt integer NOT NULL,
            tool text NOT NULL,
            plan_id text NOT NULL,
            payload jsonb NOT NULL,
            payload_digest text NOT NULL,
            capability_id text NOT NULL,
            commitment text NOT NULL,
            receipt_position bigint NOT NULL,
            context jsonb NOT NULL,
            instance_id text NOT NULL,
            confirmation_id text,
            settled boolean NOT NULL DEFAULT false,
            boundary text,
            created_at timestamptz NOT NULL DEFAULT now(),
            settled_at timestamptz,
            started_at timestamptz,
            CONSTRAINT pk_intents PRIMARY KEY (tenant_id, intent_id),
            CONSTRAINT uq_intents_idempotency_key_attempt_tenant_id
                UNIQUE (idempotency_key, attempt, tenant_id),
            CONSTRAINT uq_intents_receipt_position UNIQUE (receipt_position),
            CONSTRAINT fk_intents_capabilities FOREIGN KEY (tenant_id, capability_id)
                REFERENCES capabilities (tenant_id, capability_id),
            CONSTRAINT fk_intents_runs FOREIGN KEY (tenant_id, run_id)
                REFERENCES runs (tenant_id, run_id),
            CONSTRAINT ck_intents_boundary_known CHECK (boundary IS NULL OR
                boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED', 'EFFECT_STARTED',
                             'EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_STATE_UNKNOWN')),
            CONSTRAINT ck_intents_settled_has_time CHECK (settled = (settled_at IS NOT NULL)),
            {_TENANT.format(table="intents")}
        )""")
    op.execute(
        "CREATE UNIQUE INDEX uq_intents_one_unsettled_attempt ON intents (idempotency_key)"
        " WHERE NOT settled"
    )

    # actions: each decision with the summary of its latest attempt.
    op.execute("""
        INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool,
            payload_digest, attempts, in_flight, last_boundary, last_retryable, last_position,
            created_at)
        SELECT d.tenant_id, d.idempotency_key, d.run_id, d.causal_id, d.tool, d.payload_digest,
               greatest(coalesce(a.attempt, 0), coalesce(j.attempt, 0)),
               a.attempt IS NOT NULL,
               CASE WHEN a.attempt IS NULL THEN j.boundary END,
               CASE WHEN a.attempt IS NULL THEN j.retryable END,
               CASE WHEN a.attempt IS NULL THEN j.position END,
               d.created_at
          FROM decisions d
          LEFT JOIN attempts a
            ON a.tenant_id = d.tenant_id AND a.idempotency_key = d.idempotency_key
          LEFT JOIN LATERAL (
               SELECT e.attempt, e.boundary, e.retryable, e.position FROM journal_entries e
                WHERE e.tenant_id = d.tenant_id AND e.idempotency_key = d.idempotency_key
                  AND e.attempt IS NOT NULL
                ORDER BY e.attempt DESC LIMIT 1) j ON true""")
    # The attempts that ran: journaled ones (settled) and in-flight ones.
    op.execute("""
        CREATE TEMPORARY TABLE ran ON COMMIT DROP AS
        SELECT e.tenant_id, e.intent_id, e.run_id, e.causal_id, e.idempotency_key,
               e.attempt, e.body::jsonb ->> 'tool' AS tool,
               coalesce(e.body::jsonb ->> 'plan_id', r.plan_id) AS plan_id,
               coalesce(e.body::jsonb -> 'capability' ->> 'id',
                        e.body::jsonb ->> 'capability_id', 'cap_' || e.intent_id) AS capability_id,
               coalesce(e.body::jsonb -> 'receipt' ->> 'intent_commitment',
                        e.body::jsonb ->> 'intent_commitment', '') AS commitment,
               coalesce(e.body::jsonb -> 'context', '{}'::jsonb) AS context,
               e.body::jsonb ->> 'confirmation_id' AS confirmation_id,
               true AS settled, e.boundary, e.recorded_at AS created_at,
               e.recorded_at AS settled_at, NULL::timestamptz AS started_at
          FROM journal_entries e JOIN runs r USING (tenant_id, run_id)
         WHERE e.kind IN ('execution', 'recovery') AND e.intent_id IS NOT NULL
        UNION ALL
        SELECT a.tenant_id, a.intent_id, a.run_id, a.causal_id, a.idempotency_key, a.attempt,
               a.tool, a.plan_id, a.capability_id, a.commitment, a.context,
               a.confirmation_id, false, NULL, a.admitted_at, NULL, a.started_at
          FROM attempts a""")
    op.execute("ALTER TABLE ran ADD COLUMN receipt_position bigint")
    op.execute("UPDATE ran SET receipt_position = nextval('receipt_position_seq')")
    op.execute("""
        INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key, attempt,
            manager_id, state, receipt_position, minted_at)
        SELECT tenant_id, capability_id, run_id, idempotency_key, attempt, 'migrated',
               'CONSUMED', receipt_position, created_at
          FROM ran""")
    op.execute("""
        INSERT INTO intents (tenant_id, intent_id, run_id, causal_id, idempotency_key, attempt,
            tool, plan_id, payload, payload_digest, capability_id, commitment,
            receipt_position, context, instance_id, confirmation_id, settled, boundary,
            created_at, settled_at, started_at)
        SELECT x.tenant_id, x.intent_id, x.run_id, x.causal_id, x.idempotency_key, x.attempt,
               coalesce(x.tool, d.tool), x.plan_id, coalesce(d.payload, '{}'::jsonb),
               d.payload_digest, x.capability_id, x.commitment, x.receipt_position, x.context,
               coalesce(a.owner, 'migrated'), x.confirmation_id, x.settled, x.boundary,
               x.created_at, x.settled_at, x.started_at
          FROM ran x
          JOIN decisions d
            ON d.tenant_id = x.tenant_id AND d.run_id = x.run_id AND d.causal_id = x.causal_id
          LEFT JOIN attempts a
            ON a.tenant_id = x.tenant_id AND a.idempotency_key = x.idempotency_key
           AND a.attempt = x.attempt""")

    op.execute("DROP TABLE attempts")
    op.execute("DROP TABLE decisions")
    op.execute("ALTER TABLE journal_entries DROP COLUMN retryable")
    op.execute("ALTER TABLE runs DROP COLUMN receipts")
    # The functions as revisions 0001 and 0003 left them.
    for name in ("0001_functions.sql", "0003_functions.sql"):
        statements = _statements(_MIGRATIONS / "sql" / name)
        for statement in statements:
            if name == "0001_functions.sql" and (
                "FUNCTION arvis_journal_append" in statement
                or "FUNCTION arvis_settle_attempt" in statement
                or "FUNCTION arvis_journal_execution" in statement
            ):
                continue  # replaced by revision 0003
            op.execute(statement)

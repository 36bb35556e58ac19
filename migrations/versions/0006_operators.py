"""Settling the uncertain, and approvals that scale (issue 16).

- ``resolutions``: one row per attempt journaled uncertain (``EFFECT_STARTED`` /
  ``EFFECT_STATE_UNKNOWN``), written with the entry by the trigger ``arvis_on_entry``;
  resolving it (``arvis_resolve``) fills it in and appends a ``resolution`` entry to
  the run's chain. The retry table reads it beside the attempt it resolves. Existing
  uncertain entries are backfilled as open rows.
- ``journal_entries.kind`` admits ``resolution``.
- ``api_keys.groups``: approver groups. ``confirmations`` keep the terms frozen when
  consent was asked (approver groups, quorum, the tool's definition fingerprint and
  the policy digest); ``confirmation_approvals`` holds one row per distinct approver
  (``arvis_approve``).
- ``notify_outbox``: the durable outbox of webhook notifications, written by the
  triggers ``arvis_on_entry`` and ``arvis_on_confirmation`` in the transaction of the
  fact they report.
- ``arvis_admit`` checks a confirmation's expiry by the database's clock when it
  reserves it; ``arvis_request_consent`` takes the approval terms.

Downgrade drops all of it and reinstalls revision 0005's function texts (frozen
under ``arvis/migrations/sql/0005/``). A journal that holds resolution entries
cannot be downgraded: revision 0005 has no such kind, and a chain is never rewritten.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op
from sqlalchemy import text

from arvis.store.migrate import FUNCTIONS_DIR

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = FUNCTIONS_DIR
_FROZEN_0005 = _MIGRATIONS / "sql" / "0005"
# Functions a later revision changed: this revision installs its own text, frozen.
_FROZEN = _MIGRATIONS / "sql" / "0006"


def function_text(name: str) -> Path:
    """This revision's text of ``name``: frozen under sql/0006/ once a later revision
    changed it (0007 changed arvis_admit, 0010 arvis_request_consent), else the current
    file."""
    frozen = _FROZEN / f"{name}.sql"
    return frozen if frozen.is_file() else _CURRENT / f"{name}.sql"


# The functions this revision installs or replaces, in dependency order.
FUNCTIONS = (
    "arvis_admit",
    "arvis_request_consent",
    "arvis_resolve",
    "arvis_approve",
    "arvis_notify",
)
_OLD_CONSENT = (
    "arvis_request_consent(text, text, text, text, text, text, text, text, text, text,"
    " timestamptz, timestamptz)"
)
_NEW_CONSENT = _OLD_CONSENT[:-1] + ", jsonb)"
_KINDS_0005 = "'execution', 'refusal', 'recovery', 'confirmation'"
_TENANT = "CONSTRAINT ck_{table}_tenant_present CHECK (tenant_id <> '')"


def _execute_file(path: Path) -> None:
    # One file may hold several functions; each ends with "$$;".
    for part in path.read_text().split("$$;")[:-1]:
        op.execute(part + "$$")


def upgrade() -> None:
    op.execute("ALTER TABLE api_keys ADD COLUMN groups text[] NOT NULL DEFAULT '{}'")
    op.execute("""
        ALTER TABLE confirmations
            ADD COLUMN approver_groups text[] NOT NULL DEFAULT '{}',
            ADD COLUMN quorum integer NOT NULL DEFAULT 1,
            ADD COLUMN definition_fingerprint text,
            ADD COLUMN policy_digest text,
            ADD CONSTRAINT ck_confirmations_quorum_positive CHECK (quorum >= 1)""")
    op.execute(
        "CREATE INDEX ix_confirmations_expires_at ON confirmations (expires_at)"
        " WHERE state IN ('PENDING', 'APPROVED')"
    )
    op.execute(f"""
        CREATE TABLE confirmation_approvals (
            tenant_id text NOT NULL,
            confirmation_id text NOT NULL,
            principal_id text NOT NULL,
            auth_method text NOT NULL,
            key_id text,
            groups text[] NOT NULL DEFAULT '{{}}',
            decided_at timestamptz NOT NULL,
            position bigint NOT NULL,
            CONSTRAINT pk_confirmation_approvals
                PRIMARY KEY (tenant_id, confirmation_id, principal_id),
            CONSTRAINT fk_confirmation_approvals_confirmations
                FOREIGN KEY (tenant_id, confirmation_id)
                REFERENCES confirmations (tenant_id, confirmation_id),
            {_TENANT.format(table="confirmation_approvals")}
        )""")
    op.execute(f"""
        CREATE TABLE resolutions (
            tenant_id text NOT NULL,
            idempotency_key text NOT NULL,
            attempt integer NOT NULL,
            run_id text NOT NULL,
            causal_id text NOT NULL,
            uncertain_position bigint NOT NULL,
            boundary text,
            position bigint,
            resolved_by text,
            resolved_at timestamptz,
            asks integer NOT NULL DEFAULT 0,
            next_ask_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_resolutions PRIMARY KEY (tenant_id, idempotency_key, attempt),
            CONSTRAINT fk_resolutions_runs FOREIGN KEY (tenant_id, run_id)
                REFERENCES runs (tenant_id, run_id),
            {_TENANT.format(table="resolutions")},
            CONSTRAINT ck_resolutions_boundary_resolved CHECK (boundary IS NULL OR boundary IN
                ('EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_NOT_STARTED'))
        )""")
    op.execute(
        "CREATE INDEX ix_resolutions_next_ask_at ON resolutions (next_ask_at)"
        " WHERE boundary IS NULL"
    )
    op.execute(f"""
        CREATE TABLE notify_outbox (
            tenant_id text NOT NULL,
            event_id text NOT NULL,
            event_type text NOT NULL,
            subject jsonb NOT NULL,
            occurred_at timestamptz NOT NULL DEFAULT now(),
            state text NOT NULL DEFAULT 'PENDING',
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            delivered_to text[] NOT NULL DEFAULT '{{}}',
            last_error text,
            delivered_at timestamptz,
            CONSTRAINT pk_notify_outbox PRIMARY KEY (tenant_id, event_id),
            {_TENANT.format(table="notify_outbox")},
            CONSTRAINT ck_notify_outbox_state_known CHECK
                (state IN ('PENDING', 'DELIVERED', 'DEAD'))
        )""")
    op.execute(
        "CREATE INDEX ix_notify_outbox_next_attempt_at ON notify_outbox (next_attempt_at)"
        " WHERE state = 'PENDING'"
    )
    op.execute("ALTER TABLE journal_entries DROP CONSTRAINT ck_journal_entries_kind_known")
    op.execute(
        "ALTER TABLE journal_entries ADD CONSTRAINT ck_journal_entries_kind_known"
        f" CHECK (kind IN ({_KINDS_0005}, 'resolution'))"
    )
    # What earlier revisions journaled uncertain is open for resolution too.
    op.execute("""
        INSERT INTO resolutions (tenant_id, idempotency_key, attempt, run_id, causal_id,
            uncertain_position)
        SELECT tenant_id, idempotency_key, attempt, run_id, causal_id, position
          FROM journal_entries
         WHERE attempt IS NOT NULL AND boundary IN ('EFFECT_STARTED', 'EFFECT_STATE_UNKNOWN')
        ON CONFLICT DO NOTHING""")
    op.execute(f"DROP FUNCTION {_OLD_CONSENT}")
    for name in FUNCTIONS:
        _execute_file(function_text(name))
    op.execute("""
        CREATE TRIGGER tr_journal_entries_notify AFTER INSERT ON journal_entries
        FOR EACH ROW WHEN (NEW.kind = 'resolution'
            OR NEW.boundary IN ('EFFECT_STARTED', 'EFFECT_STATE_UNKNOWN'))
        EXECUTE FUNCTION arvis_on_entry()""")
    op.execute("""
        CREATE TRIGGER tr_confirmations_requested AFTER INSERT ON confirmations
        FOR EACH ROW EXECUTE FUNCTION arvis_on_confirmation()""")
    op.execute("""
        CREATE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
            (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
            OR NEW.state IN ('DENIED', 'EXPIRED')))
        EXECUTE FUNCTION arvis_on_confirmation()""")


def downgrade() -> None:
    held = op.get_bind().execute(
        text("SELECT count(*) FROM journal_entries WHERE kind = 'resolution'")
    )
    if held.scalar_one():
        raise RuntimeError(
            "the journal holds resolution entries, which revision 0005 cannot represent; "
            "a chain is never rewritten, so this database cannot be downgraded below 0006"
        )
    op.execute("DROP TRIGGER tr_confirmations_decided ON confirmations")
    op.execute("DROP TRIGGER tr_confirmations_requested ON confirmations")
    op.execute("DROP TRIGGER tr_journal_entries_notify ON journal_entries")
    for function in (
        "arvis_on_confirmation()",
        "arvis_on_entry()",
        "arvis_event_id(text[])",
        "arvis_approve(text, text, text, text, text, text, text, text, text[], integer, text,"
        " text, text, text)",
        "arvis_resolve(text, text, text, text, integer, bigint, text, text, text, text)",
        _NEW_CONSENT,
    ):
        op.execute(f"DROP FUNCTION {function}")
    for name in ("arvis_admit", "arvis_request_consent"):
        _execute_file(_FROZEN_0005 / f"{name}.sql")
    op.execute("ALTER TABLE journal_entries DROP CONSTRAINT ck_journal_entries_kind_known")
    op.execute(
        "ALTER TABLE journal_entries ADD CONSTRAINT ck_journal_entries_kind_known"
        f" CHECK (kind IN ({_KINDS_0005}))"
    )
    op.execute("DROP TABLE notify_outbox")
    op.execute("DROP TABLE resolutions")
    op.execute("DROP TABLE confirmation_approvals")
    op.execute("DROP INDEX ix_confirmations_expires_at")
    op.execute("""
        ALTER TABLE confirmations
            DROP CONSTRAINT ck_confirmations_quorum_positive,
            DROP COLUMN policy_digest,
            DROP COLUMN definition_fingerprint,
            DROP COLUMN quorum,
            DROP COLUMN approver_groups""")
    op.execute("ALTER TABLE api_keys DROP COLUMN groups")

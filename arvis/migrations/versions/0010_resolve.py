"""Settling an uncertain outcome meets the consent terms (issue 23, DESIGN §10).

An attempt that ran under consent used that consent up (``CONSUMED``). Resolved as
not started, it would let the next attempt run under the used-up consent, whoever
resolved it. Now the resolution opens the consent's next round of approval, under the
terms frozen when it was asked, in the same statement:

- ``confirmations.round`` (1 for every existing confirmation) and
  ``confirmations.renewed_at`` (when the current round opened, from the second on).
- ``confirmation_approvals.round``: approvals are distinct per round; the primary key
  becomes (tenant, confirmation, round, principal). Earlier rounds' rows stay.
- ``arvis_resolve`` takes ``p_consent`` (the next round Python decided on: its state,
  expiry and the resolver's approval when it counts as one) and writes it with the
  resolution, or answers ``stale``.
- ``arvis_approve`` takes ``p_round``: it counts and dedupes the approvals of that
  round, and answers ``stale`` when the round moved on.
- ``arvis_on_confirmation`` reports a re-opened consent (``confirmation.requested``,
  or ``confirmation.approved`` when the resolver's approval met the quorum), with the
  round in the event id and subject from the second round on; the trigger
  ``tr_confirmations_decided`` fires on those transitions too.

The function texts are arvis/store/sql/; the texts they replace are frozen under
arvis/migrations/sql/0006/. Downgrade keeps only each confirmation's current round of
approvals (revision 0009 knows one round) and reinstalls revision 0006's texts.

Revision ID: 0010_resolve
Revises: 0009
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0010_resolve"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = _MIGRATIONS.parent / "store" / "sql"
_PREVIOUS = _MIGRATIONS / "sql" / "0006"
CHANGED = ("arvis_resolve", "arvis_approve", "arvis_notify")
_DROPPED = ("arvis_resolve", "arvis_approve")
"""The functions whose signature changes: every overload of each is dropped first."""

_DECIDED_0006 = """
    CREATE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
        (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
        OR NEW.state IN ('DENIED', 'EXPIRED')))
    EXECUTE FUNCTION arvis_on_confirmation()"""
_DECIDED = """
    CREATE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
        (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
        OR (OLD.state = 'CONSUMED' AND NEW.state IN ('PENDING', 'APPROVED'))
        OR NEW.state IN ('DENIED', 'EXPIRED')))
    EXECUTE FUNCTION arvis_on_confirmation()"""


def _drop(name: str) -> None:
    # Every overload: a signature that grew a parameter is a new function, not a
    # replacement, and both must not stay callable.
    op.execute(f"""
        DO $$
        DECLARE f regprocedure;
        BEGIN
            FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname = '{name}'
                       AND pronamespace = current_schema()::regnamespace LOOP
                EXECUTE 'DROP FUNCTION ' || f;
            END LOOP;
        END
        $$""")


def _execute_file(path: Path) -> None:
    # One file may hold several functions; each ends with "$$;".
    for part in path.read_text().split("$$;")[:-1]:
        op.execute(part + "$$")


def _install(folder: Path) -> None:
    for name in _DROPPED:
        _drop(name)
    for name in CHANGED:
        _execute_file(folder / f"{name}.sql")


def upgrade() -> None:
    op.execute("""
        ALTER TABLE confirmations
            ADD COLUMN round integer NOT NULL DEFAULT 1,
            ADD COLUMN renewed_at timestamptz,
            ADD CONSTRAINT ck_confirmations_round_positive CHECK (round >= 1)""")
    op.execute("""
        ALTER TABLE confirmation_approvals
            ADD COLUMN round integer NOT NULL DEFAULT 1,
            DROP CONSTRAINT pk_confirmation_approvals,
            ADD CONSTRAINT pk_confirmation_approvals
                PRIMARY KEY (tenant_id, confirmation_id, round, principal_id)""")
    _install(_CURRENT)
    op.execute("DROP TRIGGER tr_confirmations_decided ON confirmations")
    op.execute(_DECIDED)


def downgrade() -> None:
    op.execute("DROP TRIGGER tr_confirmations_decided ON confirmations")
    op.execute(_DECIDED_0006)
    _install(_PREVIOUS)
    # Revision 0009 knows one round: the current one's approvals are the ones it counts.
    op.execute("""
        DELETE FROM confirmation_approvals a USING confirmations c
         WHERE c.tenant_id = a.tenant_id AND c.confirmation_id = a.confirmation_id
           AND a.round <> c.round""")
    op.execute("""
        ALTER TABLE confirmation_approvals
            DROP CONSTRAINT pk_confirmation_approvals,
            DROP COLUMN round,
            ADD CONSTRAINT pk_confirmation_approvals
                PRIMARY KEY (tenant_id, confirmation_id, principal_id)""")
    op.execute("""
        ALTER TABLE confirmations
            DROP CONSTRAINT ck_confirmations_round_positive,
            DROP COLUMN renewed_at,
            DROP COLUMN round""")

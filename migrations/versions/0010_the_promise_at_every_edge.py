"""The promise at every edge (issue 23, DESIGN §10): one revision for the wave.

**Settling an uncertain outcome meets the consent terms.**

Settling an uncertain outcome meets the consent terms (issue 23, DESIGN §10).

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

**Runs bound to their principal; decisions keep the plan they were decided under.**

Runs bound to their principal; decisions keep the plan they were decided under (issue 23).

- ``runs.principal_id``: the principal a run is bound to (DESIGN §10 "A decision belongs
  to its principal"). ``arvis_bind`` sets it when it creates a run, from the sealed
  context of the step (admission, consent) or the refusal's principal, and answers
  ``identity_mismatch`` — writing nothing — to every later step of another principal.
  Existing runs are bound to the principal of their earliest recorded step: a journal
  entry that names one (a refusal's ``principal_id``, an execution's or recovery's sealed
  context, revision 0005 on), a confirmation's or an attempt in flight's context,
  whichever was recorded first. A run that names no principal anywhere (nothing of it
  records one) stays NULL and is bound by its next syscall.
- ``arvis_bind`` no longer refuses a step under another plan than the run's first one
  (``plan_mismatch``): every decision is decided under the caller's current plan, and one
  with history under what its latest attempt was (Python decides it on the history,
  which the statements re-check). ``arvis_admit`` records the attempt's own plan.
- ``arvis_admit``, ``arvis_journal`` and ``arvis_request_consent`` pass the principal to
  ``arvis_bind`` (from the arguments they already take) and answer ``identity_mismatch``.
  Their texts before it are frozen under arvis/migrations/sql/0007/ (arvis_admit,
  arvis_journal), sql/0006/ (arvis_request_consent) and sql/0005/ (arvis_bind).

Downgrade drops the column and reinstalls the functions as revisions 0005-0007 left them.

**A run's evidence found broken, kept on the run.**

A run's evidence found broken, kept on the run (issue 23).

- ``runs.evidence_broken_at`` and ``runs.evidence_fault``: the first position at which
  the run's evidence (its chain, its signed checkpoints, the witness) was found not to
  hold, and what was found, by whom and when. Set once, by the checkpointer (a head
  that does not descend from the one it signed last), by ``verify`` and replay with the
  deployment's own key and witness, and by a deduplicated answer whose entry does not
  recompute. Deduplicated answers and replays of a flagged run are refused
  (``chain_broken``). NULL: nothing was found.

No server-side function changes: the journal statement never reads or writes them.
Downgrade drops the two columns (what was found is lost; the witness and the log keep
their account).

Downgrade undoes the three parts in the reverse order.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

from arvis.store.migrate import FUNCTIONS_DIR

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MIGRATIONS = Path(__file__).resolve().parents[1]
_CURRENT = FUNCTIONS_DIR
# Functions a later revision changed: this revision installs its own text, frozen.
_FROZEN = _MIGRATIONS / "sql" / "0010"
_RESOLVE_PREVIOUS = _MIGRATIONS / "sql" / "0006"
_RESOLVE_CHANGED = ("arvis_resolve", "arvis_approve", "arvis_notify")
_RESOLVE_DROPPED = ("arvis_resolve", "arvis_approve")
"""The functions whose signature changes: every overload of each is dropped first."""

_RESOLVE_DECIDED_0006 = """
    CREATE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
        (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
        OR NEW.state IN ('DENIED', 'EXPIRED')))
    EXECUTE FUNCTION arvis_on_confirmation()"""
_RESOLVE_DECIDED = """
    CREATE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
        (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
        OR (OLD.state = 'CONSUMED' AND NEW.state IN ('PENDING', 'APPROVED'))
        OR NEW.state IN ('DENIED', 'EXPIRED')))
    EXECUTE FUNCTION arvis_on_confirmation()"""


def function_text(name: str) -> Path:
    """This revision's text of ``name``: frozen under sql/0010/ once a later revision
    changed it (0011 changed arvis_journal, arvis_approve, arvis_resolve and
    arvis_request_consent; 0015 arvis_bind and arvis_admit too), else the current file."""
    frozen = _FROZEN / f"{name}.sql"
    return frozen if frozen.is_file() else _CURRENT / f"{name}.sql"


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


def _resolve_execute_file(path: Path) -> None:
    # One file may hold several functions; each ends with "$$;".
    for part in path.read_text().split("$$;")[:-1]:
        op.execute(part + "$$")


def _resolve_install(folder: Path | None) -> None:
    """``folder``'s texts, or this revision's (None)."""
    for name in _RESOLVE_DROPPED:
        _drop(name)
    for name in _RESOLVE_CHANGED:
        _resolve_execute_file(function_text(name) if folder is None else folder / f"{name}.sql")


def _resolve_upgrade() -> None:
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
    _resolve_install(None)
    op.execute("DROP TRIGGER tr_confirmations_decided ON confirmations")
    op.execute(_RESOLVE_DECIDED)


def _resolve_downgrade() -> None:
    op.execute("DROP TRIGGER tr_confirmations_decided ON confirmations")
    op.execute(_RESOLVE_DECIDED_0006)
    _resolve_install(_RESOLVE_PREVIOUS)
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


# In dependency order; what the revisions before this one installed.
_PRINCIPAL_PREVIOUS = {
    "arvis_bind": _MIGRATIONS / "sql" / "0005" / "arvis_bind.sql",
    "arvis_admit": _MIGRATIONS / "sql" / "0007" / "arvis_admit.sql",
    "arvis_journal": _MIGRATIONS / "sql" / "0007" / "arvis_journal.sql",
    "arvis_request_consent": _MIGRATIONS / "sql" / "0006" / "arvis_request_consent.sql",
}

# The earliest recorded principal of each run. Refusals name it at the top of their
# body; executions and recoveries in their sealed context (entries from before
# revision 0005 have none); confirmations and attempts in flight in their context.
_PRINCIPAL_BACKFILL = """
    UPDATE runs r SET principal_id = first.principal_id
      FROM (
        SELECT DISTINCT ON (tenant_id, run_id) tenant_id, run_id, principal_id
          FROM (
            SELECT tenant_id, run_id, recorded_at AS at, position AS ord,
                   CASE WHEN kind = 'refusal' THEN body::jsonb ->> 'principal_id'
                        ELSE body::jsonb -> 'context' ->> 'principal_id' END AS principal_id
              FROM journal_entries WHERE kind IN ('execution', 'refusal', 'recovery')
            UNION ALL
            SELECT tenant_id, run_id, created_at, 0, context ->> 'principal_id'
              FROM confirmations
            UNION ALL
            SELECT tenant_id, run_id, admitted_at, 0, context ->> 'principal_id'
              FROM attempts
          ) recorded
         WHERE coalesce(principal_id, '') <> ''
         ORDER BY tenant_id, run_id, at, ord
      ) first
     WHERE r.tenant_id = first.tenant_id AND r.run_id = first.run_id
"""


def _principal_upgrade() -> None:
    op.execute("ALTER TABLE runs ADD COLUMN principal_id text")
    op.execute(_PRINCIPAL_BACKFILL)
    for name in _PRINCIPAL_PREVIOUS:
        _drop(name)
        op.execute(function_text(name).read_text())


def _principal_downgrade() -> None:
    for name, path in _PRINCIPAL_PREVIOUS.items():
        _drop(name)
        op.execute(path.read_text())
    op.execute("ALTER TABLE runs DROP COLUMN principal_id")


def _evidence_upgrade() -> None:
    op.execute(
        "ALTER TABLE runs ADD COLUMN evidence_broken_at bigint, ADD COLUMN evidence_fault text"
    )


def _evidence_downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN evidence_fault, DROP COLUMN evidence_broken_at")


def upgrade() -> None:
    _resolve_upgrade()
    _principal_upgrade()
    _evidence_upgrade()


def downgrade() -> None:
    _evidence_downgrade()
    _principal_downgrade()
    _resolve_downgrade()

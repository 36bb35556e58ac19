"""Where Slack's messages are, and which policy asked for a consent (issue 27).

- ``slack_messages``: one row per confirmation whose request ARVIS posted to Slack — the
  round, the channel and the message's ``ts`` from ``chat.postMessage``'s answer — so
  the message is updated with the outcome wherever the consent is decided (the console,
  the API, the CLI, an MCP elicitation, the expiry sweep). ``message_ts`` is NULL from
  the moment a post begins until its answer is recorded: a redelivery that finds it so
  knows an earlier post may have landed and looks for it before posting again. A tenant
  table (``tenant_id`` in its key): on Citus it is distributed by ``tenant_id``,
  colocated with ``runs``, by the next ``arvis migrate`` (arvis/store/distribution.py).
  No foreign key to ``confirmations``: until it is placed it is a plain table of the
  coordinator, which may not refer to a distributed table.
- ``confirmations.policy`` (jsonb): which policy asked for the consent and why (engine,
  version, digest, the deciding policy ids, the reason), written by
  ``arvis_request_consent`` from its terms' ``policy``; NULL for consents asked before.
  The function's text this revision installs is frozen under ``sql/0018/``.

Downgrade drops the table (the messages stay in Slack; a later upgrade no longer knows
them, so decisions are not pushed to them), reinstalls revision 0015's
``arvis_request_consent`` and drops the column.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQL = Path(__file__).resolve().parents[1] / "sql"

FUNCTIONS = ("arvis_request_consent",)
PREVIOUS = {"arvis_request_consent": _SQL / "0015"}
"""Where the texts this revision replaces are frozen."""


def upgrade() -> None:
    # The function first: on Citus a distributed function cannot be replaced in a
    # transaction that already changed a distributed table over several connections
    # (the ALTER below). Its body is checked when it runs, not here.
    for name in FUNCTIONS:
        op.execute((_SQL / "0018" / f"{name}.sql").read_text())
    op.execute("ALTER TABLE confirmations ADD COLUMN policy jsonb")
    op.execute("""
        CREATE TABLE slack_messages (
            tenant_id text NOT NULL,
            confirmation_id text NOT NULL,
            round integer NOT NULL,
            channel text NOT NULL,
            message_ts text,
            posting_at timestamptz NOT NULL DEFAULT now(),
            posted_at timestamptz,
            CONSTRAINT pk_slack_messages PRIMARY KEY (tenant_id, confirmation_id),
            CONSTRAINT ck_slack_messages_tenant_present CHECK (tenant_id <> ''),
            CONSTRAINT ck_slack_messages_round_positive CHECK (round >= 1),
            CONSTRAINT ck_slack_messages_posted_with_ts
                CHECK ((message_ts IS NULL) = (posted_at IS NULL))
        )""")


def downgrade() -> None:
    for name, folder in PREVIOUS.items():  # first, as in upgrade
        op.execute((folder / f"{name}.sql").read_text())
    op.execute("DROP TABLE slack_messages")
    op.execute("ALTER TABLE confirmations DROP COLUMN policy")

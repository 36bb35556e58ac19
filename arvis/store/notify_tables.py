"""The notifications' tables: the outbox (revision 0006) and where Slack's messages are
(revision 0018). Declared on the schema's one ``MetaData``; ``arvis.store.tables``
re-exports them, so the schema read from there is whole."""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from arvis.store.columns import at_ as _at
from arvis.store.columns import defaulted as _defaulted
from arvis.store.columns import in_ as _in
from arvis.store.columns import metadata
from arvis.store.columns import tenant_check as _tenant_check
from arvis.store.columns import texts as _texts

OUTBOX_STATES = ("PENDING", "DELIVERED", "DEAD")

# The durable outbox of notifications (revision 0006): written by triggers in the
# transaction of the event it reports, delivered after commit by the deliverer.
notify_outbox = Table(
    "notify_outbox",
    metadata,
    *_texts("tenant_id", "event_id", "event_type"),
    Column("subject", JSONB, nullable=False),
    _at("occurred_at", now=True),
    _defaulted("state", Text, "'PENDING'"),
    _defaulted("attempts", Integer, "0"),
    _at("next_attempt_at", now=True),
    _defaulted("delivered_to", ARRAY(Text), "'{}'"),
    Column("last_error", Text),
    _at("delivered_at", required=False),
    PrimaryKeyConstraint("tenant_id", "event_id"),
    _tenant_check(),
    CheckConstraint(_in("state", OUTBOX_STATES), name="state_known"),
    Index(
        "ix_notify_outbox_next_attempt_at",
        "next_attempt_at",
        postgresql_where=text("state = 'PENDING'"),
    ),
)

# Where each consent request was posted in Slack (revision 0018), so that its message is
# updated wherever the consent is decided: one row per confirmation, its latest round's
# message. ``message_ts`` (Slack's id of the message) is NULL while a post was begun and
# its answer is not known. No foreign key to confirmations: on Citus a table a revision
# adds is a plain table of the coordinator until it is placed, and such a table may not
# refer to a distributed one.
slack_messages = Table(
    "slack_messages",
    metadata,
    *_texts("tenant_id", "confirmation_id"),
    Column("round", Integer, nullable=False),
    *_texts("channel"),
    Column("message_ts", Text),
    _at("posting_at", now=True),
    _at("posted_at", required=False),
    PrimaryKeyConstraint("tenant_id", "confirmation_id"),
    _tenant_check(),
    CheckConstraint("round >= 1", name="round_positive"),
    CheckConstraint("(message_ts IS NULL) = (posted_at IS NULL)", name="posted_with_ts"),
)

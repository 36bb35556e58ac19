"""The column and constraint shapes the lifecycle's tables repeat (``arvis.store.tables``),
and the one ``MetaData`` they and the notifications' tables (``arvis.store.notify_tables``)
are declared on."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    MetaData,
    Text,
    text,
)
from sqlalchemy.types import TypeEngine

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def in_(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def texts(*names: str) -> list[Column[str]]:
    """Required text columns, in this order."""
    return [Column(name, Text, nullable=False) for name in names]


def at_(name: str, *, now: bool = False, required: bool = True) -> Column[datetime]:
    """A timestamp with time zone; ``now``: defaulted to the writing transaction's time."""
    default = text("now()") if now else None
    return Column(name, DateTime(timezone=True), nullable=not required, server_default=default)


def defaulted(
    name: str, type_: type[TypeEngine[Any]] | TypeEngine[Any], default: str
) -> Column[Any]:
    """A required column the database fills with ``default`` (SQL) when a write omits it."""
    return Column(name, type_, nullable=False, server_default=text(default))


def of_run() -> ForeignKeyConstraint:
    """A row that belongs to one run of its tenant."""
    return ForeignKeyConstraint(["tenant_id", "run_id"], ["runs.tenant_id", "runs.run_id"])


def tenant_check() -> CheckConstraint:
    return CheckConstraint("tenant_id <> ''", name="tenant_present")


def entry_actor(alias: str = "") -> str:
    """The agent an entry's body names as acting for its principal (issue 26), or NULL:
    a refusal's ``actor``, a consent decision's ``requested_actor``, the sealed context's
    ``actor`` of an execution or a recovery. The expression of the partial index
    ``ix_journal_entries_actor`` (revision 0019) and of the runs list's read, which must
    say it in the same words for the planner to use the index. Its line breaks are where
    PostgreSQL prints them back, so autogenerate compares the index as equal."""
    kind, body = f"{alias}kind", f"{alias}body::json"
    return (
        f"(\nCASE\n    WHEN {kind} = 'refusal' THEN {body} #>> '{{actor,principal_id}}'"
        f"\n    WHEN {kind} = 'confirmation' THEN {body} ->> 'requested_actor'"
        f"\n    ELSE {body} #>> '{{context,actor,principal_id}}'\nEND)"
    )


def names_an_actor(alias: str = "") -> str:
    """The index's predicate: only a body that may name an actor is in it. Canonical
    text has no space after a colon, so every body with an actor holds the words; a
    payload key ending in "actor" is in the index too, with a NULL actor."""
    return f"strpos({alias}body, 'actor\":') > 0"

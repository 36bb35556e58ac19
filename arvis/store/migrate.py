"""Schema revisions: upgrade, inspect, and refuse to run on the wrong one."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from arvis.store.distribution import distribute_schema, is_distributed, refuse_unless_coordinator
from arvis.store.engine import create_sync_engine, driver_url
from arvis.store.errors import SchemaNotReady

T = TypeVar("T")


def _migrations_dir() -> Path:
    """Where ``arvis.migrations`` is: inside the installed package, or the top-level
    ``migrations/`` folder of a source checkout (an editable install maps it)."""
    spec = importlib.util.find_spec("arvis.migrations")
    for location in [] if spec is None else spec.submodule_search_locations or []:
        if (Path(location) / "env.py").is_file():
            return Path(location)
    return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()
FUNCTIONS_DIR = Path(__file__).resolve().parent / "sql"
"""The current text of each server-side function (``arvis/store/sql/``): a revision that
installs a function's newest text reads it here; the texts it replaced are frozen under
``migrations/sql/<revision>/``."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would choke on a '%' in a password.
    config.set_main_option("sqlalchemy.url", driver_url(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    script = ScriptDirectory.from_config(alembic_config("postgresql://localhost/x"))
    head = script.get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(url: str, revision: str = "head") -> tuple[str | None, str]:
    """Bring the database to ``revision``; return (before, after). Idempotent."""
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            before = current_revision(conn)
        command.upgrade(alembic_config(url), revision)
        with engine.connect() as conn:
            after = current_revision(conn)
    finally:
        engine.dispose()
    assert after is not None
    if after == head_revision():
        # A table or function a revision added to a database sharded on Citus is placed
        # like the others.
        _on(url, lambda conn: distribute_schema(conn) if is_distributed(conn) else ())
    return before, after


def check_distributable(url: str) -> None:
    """Raise :class:`~arvis.store.distribution.NotDistributable` unless ``url`` is a
    Citus coordinator with workers (before anything is migrated)."""
    _on(url, refuse_unless_coordinator)


def distribute(url: str) -> tuple[str, ...]:
    """Shard the schema of ``url``, at this code's head, by tenant on Citus
    (:mod:`arvis.store.distribution`); answer what was placed now."""

    def place(conn: Connection) -> tuple[str, ...]:
        check_revision(conn)
        return distribute_schema(conn)

    return _on(url, place)


def _on(url: str, use: Callable[[Connection], T]) -> T:
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            return use(conn)
    finally:
        engine.dispose()


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def check_revision(connection: Connection) -> str:
    """The database's revision if it is exactly this code's head, else SchemaNotReady."""
    current = current_revision(connection)
    head = head_revision()
    if current is None:
        raise SchemaNotReady("the database has no ARVIS schema; run `arvis migrate` first")
    if current != head:
        script = ScriptDirectory.from_config(alembic_config("postgresql://localhost/x"))
        known = {rev.revision for rev in script.walk_revisions()}
        if current not in known:
            raise SchemaNotReady(
                f"the database is at revision {current}, newer than this code ({head}); "
                "upgrade ARVIS before starting it against this database"
            )
        raise SchemaNotReady(
            f"the database is at revision {current}, this code needs {head}; run `arvis migrate`"
        )
    return current


def store_fingerprint(connection: Connection, revision: str) -> str:
    """DESIGN §5: the database's system identifier plus the schema revision."""
    system_id = connection.execute(
        text("SELECT system_identifier::text FROM pg_control_system()")
    ).scalar_one()
    return f"{system_id}:{revision}"

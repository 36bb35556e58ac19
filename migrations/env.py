"""Alembic environment: sync psycopg 3, one advisory lock so concurrent
``arvis migrate`` runs take turns instead of racing."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from arvis.store.engine import create_sync_engine
from arvis.store.tables import metadata

# Arbitrary but fixed: every ARVIS migrator takes the same lock.
MIGRATION_LOCK_ID = 0x41525649


def run_migrations_online() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL given to alembic")
    engine = create_sync_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


def _run(connection: object) -> None:
    from sqlalchemy.engine import Connection

    assert isinstance(connection, Connection)
    connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    connection.commit()
    try:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            compare_type=True,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID})
        connection.commit()


if context.is_offline_mode():
    raise RuntimeError("ARVIS migrations run online only")
run_migrations_online()

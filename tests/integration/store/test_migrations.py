"""The schema is created, removed and re-created cleanly, and matches the code."""

from __future__ import annotations

import psycopg
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from arvis.store.engine import create_sync_engine, libpq_url
from arvis.store.migrate import downgrade, head_revision, upgrade
from arvis.store.tables import metadata

# An extension's own objects (Citus's and pg_stat_statements' views and functions, on
# the Citus tier) are not the schema's.
_NOT_AN_EXTENSIONS = (
    "NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = {oid} AND d.deptype = 'e')"
)


def _objects(url: str) -> set[str]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            f"""
            SELECT c.relkind::text || ':' || c.relname FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
              AND {_NOT_AN_EXTENSIONS.format(oid="c.oid")}
            UNION ALL
            SELECT 'type:' || t.typname FROM pg_type t
            JOIN pg_namespace n ON n.oid = t.typnamespace
            WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0
              AND {_NOT_AN_EXTENSIONS.format(oid="t.oid")}
            UNION ALL
            SELECT 'fn:' || p.proname FROM pg_proc p
            JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
              AND {_NOT_AN_EXTENSIONS.format(oid="p.oid")}
            """
        ).fetchall()
    return {row[0] for row in rows}


def test_upgrade_downgrade_upgrade_leaves_no_leftovers(empty_database_url: str) -> None:
    before, after = upgrade(empty_database_url)
    assert (before, after) == (None, head_revision())
    full = _objects(empty_database_url)
    assert "r:journal_entries" in full
    assert {"r:decisions", "r:attempts", "fn:arvis_admit", "fn:arvis_journal"} <= full

    downgrade(empty_database_url, "base")
    assert _objects(empty_database_url) <= {"r:alembic_version", "i:alembic_version_pkc"}

    upgrade(empty_database_url)
    assert _objects(empty_database_url) == full


def test_second_upgrade_is_a_no_op(database_url: str) -> None:
    before = _objects(database_url)
    assert upgrade(database_url) == (head_revision(), head_revision())
    assert _objects(database_url) == before


def test_autogenerate_finds_no_difference_between_models_and_migrations(
    database_url: str,
) -> None:
    engine = create_sync_engine(database_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        engine.dispose()
    assert diff == []

"""The schema can be distributed by tenant (DESIGN §5, issue 13), read from the catalog.

The day a deployment outgrows one PostgreSQL, per-tenant tables become distributed
tables sharded on ``tenant_id`` (e.g. Citus). Citus requires the distribution column in
every primary key, unique constraint, unique index and exclusion constraint of a
distributed table, and in both sides of every foreign key between distributed tables; a
distributed table may reference a reference table (replicated to every node), and a
reference table may reference only reference tables. Nothing global may be counted: a
sequence is one counter across every tenant (and every shard).

The checks read pg_class, pg_index and pg_constraint of a migrated database, so they see
what the migrations built, not what arvis/store/tables.py says. They run against the head
revision, and against revision 0004 to show that they catch what 0005 removed.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from arvis.store.engine import libpq_url
from arvis.store.migrate import upgrade
from tests.support.postgres import create_database, drop_database

TENANT = "tenant_id"

REFERENCE_TABLES = {
    # Deployment configuration shared by every tenant: a plan id is the digest of its
    # definitions, so one row serves every run bound to it.
    "tool_plans",
    # One row per ARVIS process (DESIGN §6); a process serves every tenant.
    "instance_leases",
    # The key directory. A bearer token names only its key id (``arvis_<key_id>_…``), so
    # authentication looks the key up, and learns its tenant from it, before any tenant is
    # known: ``key_id`` is unique across tenants on purpose. It has a tenant_id column, but
    # it is read by key id on every request and written rarely: a reference table.
    "api_keys",
}
WITHOUT_TENANT = {"tool_plans", "instance_leases"}
"""The reference tables that have no tenant_id column at all."""
REFERENCED_BY_TENANTS = {"tool_plans"}
"""The reference tables a per-tenant table may hold a foreign key to (runs → their plan)."""
ALEMBIC_OWNED = {"alembic_version"}


def _rows(conn: psycopg.Connection, query: str) -> list[tuple[str, ...]]:
    return [tuple(row) for row in conn.execute(query).fetchall()]


def _tables(conn: psycopg.Connection) -> dict[str, bool]:
    """Every table of the schema, with whether it has a tenant_id column."""
    rows = _rows(
        conn,
        f"""SELECT c.relname, EXISTS (
                   SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                      AND a.attname = '{TENANT}' AND NOT a.attisdropped)
              FROM pg_class c
             WHERE c.relnamespace = current_schema()::regnamespace
               AND c.relkind IN ('r', 'p') AND NOT c.relispartition""",
    )
    return {name: bool(has_tenant) for name, has_tenant in rows if name not in ALEMBIC_OWNED}


def per_tenant_tables(conn: psycopg.Connection) -> set[str]:
    return {name for name, has in _tables(conn).items() if has} - REFERENCE_TABLES


# Key columns only (INCLUDE columns are not part of a key); an expression is not a column.
_UNIQUE_INDEXES = """
    SELECT t.relname, i.relname,
           coalesce(array_to_string(array(
               SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
                WHERE k.ord <= x.indnkeyatts ORDER BY k.ord), ','), ''),
           CASE WHEN x.indisprimary THEN 'primary key'
                WHEN x.indisexclusion THEN 'exclusion constraint'
                WHEN con.oid IS NOT NULL THEN 'unique constraint'
                ELSE 'unique index' END
      FROM pg_index x
      JOIN pg_class t ON t.oid = x.indrelid
      JOIN pg_class i ON i.oid = x.indexrelid
      LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.contype = 'u'
     WHERE t.relnamespace = current_schema()::regnamespace
       AND (x.indisunique OR x.indisexclusion)
     ORDER BY 1, 2"""


def key_violations(conn: psycopg.Connection, tables: set[str] | None = None) -> list[str]:
    """Each primary key, unique constraint, unique index or exclusion constraint of a
    per-tenant table (or of ``tables``) that lacks tenant_id, and each such table
    without a primary key."""
    checked = per_tenant_tables(conn) if tables is None else tables
    found: list[str] = []
    with_primary_key: set[str] = set()
    for table, index, columns, what in _rows(conn, _UNIQUE_INDEXES):
        if table not in checked:
            continue
        if what == "primary key":
            with_primary_key.add(table)
        if TENANT not in columns.split(","):
            found.append(f"{table}: {what} {index} ({columns}) lacks {TENANT}")
    found += [f"{table}: no primary key" for table in sorted(checked - with_primary_key)]
    return found


_FOREIGN_KEYS = """
    SELECT con.conname, src.relname, dst.relname,
           array_to_string(array(
               SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                ORDER BY k.ord), ','),
           array_to_string(array(
               SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
                 JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
                ORDER BY k.ord), ',')
      FROM pg_constraint con
      JOIN pg_class src ON src.oid = con.conrelid
      JOIN pg_class dst ON dst.oid = con.confrelid
     WHERE con.contype = 'f' AND src.relnamespace = current_schema()::regnamespace
     ORDER BY 1"""


def foreign_key_violations(conn: psycopg.Connection) -> list[str]:
    """Each foreign key that would cross tenants or shards once per-tenant tables are
    distributed by tenant_id."""
    tenant_tables = per_tenant_tables(conn)
    found: list[str] = []
    for name, source, target, columns, referenced in _rows(conn, _FOREIGN_KEYS):
        pairs = list(zip(columns.split(","), referenced.split(","), strict=True))
        shown = f"{name} {source} ({columns}) → {target} ({referenced})"
        if source in tenant_tables and target in tenant_tables:
            # Same tenant on both sides: the row and what it references share a shard.
            if (TENANT, TENANT) not in pairs:
                found.append(f"{shown} does not pair {TENANT} with {TENANT}")
        elif source in tenant_tables:
            if target not in REFERENCED_BY_TENANTS:
                found.append(f"{shown} points outside the tenant at a table not allowed")
        elif target in tenant_tables:
            found.append(f"{shown}: a reference table points into a tenant's rows")
    return found


def counter_violations(conn: psycopg.Connection) -> list[str]:
    """Each sequence (one count across every tenant) and each function of the schema
    that draws from one."""
    sequences = _rows(
        conn,
        """SELECT n.nspname || '.' || s.relname, coalesce(owner.relname, '')
             FROM pg_class s
             JOIN pg_namespace n ON n.oid = s.relnamespace
             LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid
                  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
             LEFT JOIN pg_class owner ON owner.oid = d.refobjid
            WHERE s.relkind = 'S'
              AND n.nspname NOT IN ('pg_catalog', 'information_schema')
            ORDER BY 1""",
    )
    drawing = _rows(
        conn,
        """SELECT p.proname FROM pg_proc p
            WHERE p.pronamespace = current_schema()::regnamespace
              AND p.prosrc ILIKE '%nextval(%' ORDER BY 1""",
    )
    return [f"sequence {name}" for name, owner in sequences if owner not in ALEMBIC_OWNED] + [
        f"function {name} draws from a sequence" for (name,) in drawing
    ]


@pytest.fixture(scope="module")
def head(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        yield conn


def test_the_tables_without_a_tenant_are_exactly_the_reference_tables_that_need_none(
    head: psycopg.Connection,
) -> None:
    tables = _tables(head)
    assert {name for name, has in tables.items() if not has} == WITHOUT_TENANT
    assert set(tables) >= REFERENCE_TABLES
    # The lifecycle's own tables are all per-tenant.
    assert {"runs", "decisions", "attempts", "confirmations", "journal_entries"} <= (
        per_tenant_tables(head)
    )


def test_every_key_of_a_per_tenant_table_includes_the_tenant(head: psycopg.Connection) -> None:
    assert key_violations(head) == []


def test_foreign_keys_stay_inside_a_tenant_or_point_at_a_reference_table(
    head: psycopg.Connection,
) -> None:
    assert foreign_key_violations(head) == []


def test_nothing_is_counted_across_tenants(head: psycopg.Connection) -> None:
    assert counter_violations(head) == []


def test_a_reference_table_with_a_tenant_column_is_listed_only_for_a_global_key(
    head: psycopg.Connection,
) -> None:
    # Were its keys per tenant, it would belong with the per-tenant tables, checked above.
    for table in sorted(REFERENCE_TABLES - WITHOUT_TENANT):
        assert key_violations(head, {table}) != [], f"{table} can be a per-tenant table"
    assert key_violations(head, {"api_keys"}) == [
        "api_keys: unique constraint uq_api_keys_key_id (key_id) lacks tenant_id"
    ]


@pytest.fixture(scope="module")
def revision_0004(pg_server_url: str) -> Iterator[psycopg.Connection]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0004")
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            yield conn
    finally:
        drop_database(pg_server_url, url)


def test_the_checks_find_what_revision_0004_counted_across_tenants(
    revision_0004: psycopg.Connection,
) -> None:
    # Receipt positions came from one global sequence and were unique across tenants;
    # one unsettled attempt per key was an index without the tenant.
    assert key_violations(revision_0004) == [
        "capabilities: unique constraint uq_capabilities_receipt_position (receipt_position)"
        " lacks tenant_id",
        "intents: unique index uq_intents_one_unsettled_attempt (idempotency_key) lacks tenant_id",
        "intents: unique constraint uq_intents_receipt_position (receipt_position) lacks tenant_id",
    ]
    assert counter_violations(revision_0004) == [
        "sequence public.receipt_position_seq",
        "function arvis_admit draws from a sequence",
    ]
    assert foreign_key_violations(revision_0004) == []

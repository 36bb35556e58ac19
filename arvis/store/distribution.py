"""ARVIS's schema sharded by tenant on Citus (issue 28; docs/scaling.md).

``arvis migrate --distribute`` runs :func:`distribute_schema` on a Citus coordinator after the
schema is at head. The layout is read from the catalog, not listed by hand, so a table
a later revision creates is placed by the same rule:

- a **tenant table** (a ``tenant_id`` column, and every primary key and unique
  constraint including it: DESIGN §5) is distributed by ``tenant_id``, colocated with
  ``runs``: a tenant's rows of every table sit in one shard group on one worker;
- any other table (``tool_plans``, ``instance_leases``, ``api_keys`` with its unique
  key id) is a **reference table**, a copy on every node;
- ``alembic_version`` stays a plain table of the coordinator (only migrations read it);
- the lifecycle's steps (:data:`STEPS`) are distributed by their tenant argument,
  colocated with ``runs``, so a step's one statement runs on the tenant's worker; every
  other ``arvis_*`` function (the entry hash, the triggers' functions) is created on
  every node, where those steps and triggers call it.

The order matters, and is Citus's: with ``citus.enable_local_reference_table_foreign_keys``
off, making ``tool_plans`` a reference table leaves ``runs`` (which refers to it) a
plain table instead of turning it and every table under it into Citus-local tables,
which could no longer be distributed; ``citus.enable_unsafe_triggers`` lets the tables
with triggers (``journal_entries``, ``confirmations``) be distributed — their triggers
only write rows of the same tenant, in the same shard group. Reference tables first,
then ``runs``, then its children, parents before children, then the functions, in one
transaction; a table that held rows has its coordinator copy truncated after commit.

Idempotent: what is placed already is left as it is, so the same call after every
migration of a distributed database (:func:`arvis.store.migrate.upgrade`) places only
what a later revision added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import Connection, text

from arvis.store.errors import NotDistributable

ANCHOR = "runs"
"""The table every tenant table and step is colocated with."""
SHARD_KEY = "tenant_id"
STEPS = (
    "arvis_bind",
    "arvis_admit",
    "arvis_admit_batch",
    "arvis_journal",
    "arvis_journal_batch",
    "arvis_request_consent",
    "arvis_approve",
    "arvis_resolve",
)
"""The lifecycle's write steps: each is one statement, distributed by ``p_tenant``."""
TENANT_ARGUMENT = "p_tenant"
COORDINATOR_ONLY = ("alembic_version",)

_TABLES_SQL = """
    SELECT c.relname,
           EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                    AND a.attname = :key AND NOT a.attisdropped) AS has_key,
           coalesce((SELECT bool_and(EXISTS (
                        SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                           AND a.attname = :key AND a.attnum = ANY (i.indkey)))
                       FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique), true)
               AS keys_have_key,
           EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid) AS placed
      FROM pg_class c
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
     ORDER BY c.relname"""
_REFERENCES_SQL = """
    SELECT c.conrelid::regclass::text, c.confrelid::regclass::text
      FROM pg_constraint c
     WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace"""
# A step is placed once Citus knows its distribution argument; any other function once
# Citus knows it at all.
_FUNCTIONS_SQL = """
    SELECT p.proname, p.oid::regprocedure::text,
           EXISTS (SELECT 1 FROM pg_dist_object o
                    WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
                      AND (o.distribution_argument_index IS NOT NULL
                           OR NOT (p.proname = ANY (:steps)))) AS placed
      FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'arvis\\_%'
     ORDER BY p.proname, p.oid"""
_WORKERS_SQL = """
    SELECT count(*) FROM pg_dist_node
     WHERE groupid <> 0 AND isactive AND noderole = 'primary' AND shouldhaveshards"""


@dataclass(frozen=True)
class Layout:
    """Where each table and function of the schema goes, and what is placed already."""

    distributed: tuple[str, ...]
    """Tenant tables, in the order they are distributed (``runs`` first)."""
    reference: tuple[str, ...]
    """Global tables, parents first."""
    functions: tuple[tuple[str, str], ...]
    """Each ``arvis_*`` function: (name, signature)."""
    placed: frozenset[str] = field(default_factory=frozenset)
    """Tables and function signatures Citus has placed already."""

    @property
    def pending(self) -> tuple[str, ...]:
        """What :func:`distribute` would still place, in its order."""
        every = (*self.reference, *self.distributed, *(sig for _, sig in self.functions))
        return tuple(name for name in every if name not in self.placed)


def _parents_first(tables: Iterable[str], references: Mapping[str, set[str]]) -> list[str]:
    """``tables`` so that each comes after the tables it refers to (``runs`` first among
    tenant tables, since it refers to none of them); ties by name."""
    remaining = sorted(tables, key=lambda name: (name != ANCHOR, name))
    ordered: list[str] = []
    while remaining:
        waiting = set(remaining)
        ready = next((t for t in remaining if not (references.get(t, set()) - {t}) & waiting), None)
        if ready is None:
            raise NotDistributable(f"foreign keys form a cycle among {', '.join(remaining)}")
        ordered.append(ready)
        remaining.remove(ready)
    return ordered


def citus_version(conn: Connection) -> str | None:
    """The Citus extension's version in this database, or None (not a Citus database)."""
    version = conn.execute(
        text("SELECT extversion FROM pg_extension WHERE extname = 'citus'")
    ).scalar_one_or_none()
    return None if version is None else str(version)


def is_distributed(conn: Connection) -> bool:
    """Whether this database's ``runs`` is a distributed table already."""
    if citus_version(conn) is None:
        return False
    return bool(
        conn.execute(
            text(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_partition"
                " WHERE logicalrelid = to_regclass(:t) AND partmethod = 'h')"
            ),
            {"t": ANCHOR},
        ).scalar_one()
    )


def layout(conn: Connection) -> Layout:
    """Where each table and function goes, read from the catalog (Citus installed)."""
    references: dict[str, set[str]] = {}
    for child, parent in conn.execute(text(_REFERENCES_SQL)):
        references.setdefault(child, set()).add(parent)
    tenant: list[str] = []
    reference: list[str] = []
    placed: set[str] = set()
    for name, has_key, keys_have_key, done in conn.execute(text(_TABLES_SQL), {"key": SHARD_KEY}):
        if name in COORDINATOR_ONLY:
            continue
        (tenant if has_key and keys_have_key else reference).append(name)
        if done:
            placed.add(name)
    for table in reference:
        tenant_parents = references.get(table, set()) & set(tenant)
        if tenant_parents:
            raise NotDistributable(
                f"{table} is not a tenant table (a key without {SHARD_KEY}) but refers to"
                f" {', '.join(sorted(tenant_parents))}, and a reference table cannot"
            )
    if ANCHOR not in tenant:
        raise NotDistributable(f"no {ANCHOR} table: migrate the schema first")
    functions: list[tuple[str, str]] = []
    for name, signature, done in conn.execute(text(_FUNCTIONS_SQL), {"steps": list(STEPS)}):
        functions.append((name, signature))
        if done:
            placed.add(signature)
    return Layout(
        distributed=tuple(_parents_first(tenant, references)),
        reference=tuple(_parents_first(reference, references)),
        functions=tuple(functions),
        placed=frozenset(placed),
    )


def refuse_unless_coordinator(conn: Connection) -> None:
    """Raise :class:`NotDistributable` unless ``conn`` is a Citus coordinator with workers."""
    version = citus_version(conn)
    if version is None:
        raise NotDistributable(
            "this database is not a Citus database (no citus extension): `--distribute` is for"
            " a Citus coordinator; create the database on every node with CREATE EXTENSION"
            " citus and add the workers (docs/scaling.md), or migrate without --distribute"
        )
    if not conn.execute(text("SELECT citus_is_coordinator()")).scalar_one():
        raise NotDistributable(
            "this is a Citus worker: run `arvis migrate --distribute` on the coordinator"
        )
    if not conn.execute(text(_WORKERS_SQL)).scalar_one():
        raise NotDistributable(
            "the Citus coordinator has no active worker: add them first"
            " (SELECT citus_add_node('<host>', <port>), docs/scaling.md)"
        )


def _place(conn: Connection, plan: Layout) -> list[str]:
    """Place what is pending, in order; answer the tables that held rows."""
    conn.execute(text("SET LOCAL citus.enable_local_reference_table_foreign_keys = off"))
    conn.execute(text("SET LOCAL citus.enable_unsafe_triggers = on"))
    pending = set(plan.pending)
    held: list[str] = []
    for table in (*plan.reference, *plan.distributed):
        if table not in pending:
            continue
        if conn.execute(text(f'SELECT EXISTS (SELECT 1 FROM ONLY "{table}")')).scalar_one():
            held.append(table)
        if table in plan.reference:
            conn.execute(text("SELECT create_reference_table(:t)"), {"t": table})
        else:
            conn.execute(
                text("SELECT create_distributed_table(:t, :key, colocate_with => :with)"),
                {"t": table, "key": SHARD_KEY, "with": "none" if table == ANCHOR else ANCHOR},
            )
    for name, signature in plan.functions:
        if signature not in pending:
            continue
        if name in STEPS:
            conn.execute(
                text("SELECT create_distributed_function(:f, :arg, colocate_with => :with)"),
                {"f": signature, "arg": TENANT_ARGUMENT, "with": ANCHOR},
            )
        else:
            conn.execute(text("SELECT create_distributed_function(:f)"), {"f": signature})
    return held


def distribute_schema(conn: Connection) -> tuple[str, ...]:
    """Distribute the schema of the Citus coordinator ``conn`` is connected to (at this
    code's head: the caller checked) as the module says; answer what was placed now
    (empty: all of it was placed already). Refuses with :class:`NotDistributable` on a
    server without Citus, on a worker, and on a coordinator without workers."""
    refuse_unless_coordinator(conn)
    plan = layout(conn)
    conn.rollback()
    if not plan.pending:
        return ()
    with conn.begin():
        held = _place(conn, plan)
    # The rows were copied into the shards; the coordinator's own copy goes.
    for table in held:
        with conn.begin():
            conn.execute(
                text("SELECT truncate_local_data_after_distributing_table(:t)"), {"t": table}
            )
    return plan.pending

"""The store's current SQL is what the head revision installs, and the boundary sets
in it are generated from the domain (issue 24)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from arvis.store.boundaries import SQL_FILE, boundaries_sql
from arvis.store.migrate import MIGRATIONS_DIR

STORE_SQL = SQL_FILE.parent


def _revision(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, MIGRATIONS_DIR / "versions" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HEAD = _revision("0011_rules_that_are_the_code")
BATCH = _revision("0012_group_commit")


def test_the_boundary_functions_are_generated_from_the_domain() -> None:
    assert SQL_FILE.read_text() == boundaries_sql(), (
        "arvis/store/sql/arvis_boundaries.sql is stale: python -m arvis.store.boundaries"
    )


# Each function's current text is the text of the last revision that installed it.
FROZEN = [("0011", name) for name in (*HEAD.FUNCTIONS, HEAD.TRIGGERS)] + [
    ("0012", name) for name in BATCH.FUNCTIONS
]


@pytest.mark.parametrize(("revision", "name"), FROZEN)
def test_the_current_text_is_the_head_revisions_frozen_text(revision: str, name: str) -> None:
    current = (STORE_SQL / f"{name}.sql").read_text()
    frozen = (MIGRATIONS_DIR / "sql" / revision / f"{name}.sql").read_text()
    assert current == frozen, f"{name} changed since revision {revision}: that is a new revision"


def test_the_trigger_file_splits_into_its_three_statements() -> None:
    statements = HEAD.statements(STORE_SQL / "arvis_triggers.sql")
    assert [s.split("TRIGGER ", 1)[1].split()[0] for s in statements] == [
        "tr_journal_entries_notify",
        "tr_confirmations_requested",
        "tr_confirmations_decided",
    ]

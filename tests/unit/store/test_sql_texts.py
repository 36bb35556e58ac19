"""The store's current SQL is what the head revision installs, and the boundary sets
in it are generated from the domain (issue 24)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from arvis.store.boundaries import SQL_FILE, boundaries_sql
from arvis.store.columns import entry_actor, names_an_actor
from arvis.store.migrate import MIGRATIONS_DIR

STORE_SQL = SQL_FILE.parent


def _revision(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, MIGRATIONS_DIR / "versions" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HEAD = _revision("0020_next_attempt")
CONSENT = _revision("0018_slack_messages")
CITUS = _revision("0015_citus_ready")
"""The revisions that install functions' texts they froze: each text is the newest
revision's that lists it."""
LATEST = _revision("0011_rules_that_are_the_code")
"""The last revision that installed the boundary functions, the journal's type and
the triggers."""
BATCH = _revision("0012_group_commit")
"""The revision that added the group-commit statements (reinstalled by the head)."""


def _frozen(name: str) -> tuple[str, str]:
    """The newest revision that froze ``name``, and its text there."""
    folder = max(
        (d for d in (MIGRATIONS_DIR / "sql").iterdir() if (d / f"{name}.sql").is_file()),
        key=lambda d: d.name,
    )
    return folder.name, (folder / f"{name}.sql").read_text()


def test_the_boundary_functions_are_generated_from_the_domain() -> None:
    assert SQL_FILE.read_text() == boundaries_sql(), (
        "arvis/store/sql/arvis_boundaries.sql is stale: python -m arvis.store.boundaries"
    )


@pytest.mark.parametrize(
    "name",
    sorted(
        {
            *HEAD.FUNCTIONS,
            *CONSENT.FUNCTIONS,
            *CITUS.FUNCTIONS,
            *LATEST.FUNCTIONS,
            LATEST.TRIGGERS,
            *BATCH.FUNCTIONS,
        }
    ),
)
def test_the_current_text_is_the_newest_frozen_text(name: str) -> None:
    current = (STORE_SQL / f"{name}.sql").read_text()
    revision, frozen = _frozen(name)
    assert current == frozen, f"{name} changed since revision {revision}: that is a new revision"


def test_the_newest_revision_that_installs_a_text_froze_it() -> None:
    installers = (CITUS, CONSENT, HEAD)
    for name in {name for revision in installers for name in revision.FUNCTIONS}:
        newest = max(r.revision for r in installers if name in r.FUNCTIONS)
        assert _frozen(name)[0] == newest, name


def test_the_trigger_file_splits_into_its_three_statements() -> None:
    statements = LATEST.statements(STORE_SQL / "arvis_triggers.sql")
    assert [s.split("TRIGGER ", 1)[1].split()[0] for s in statements] == [
        "tr_journal_entries_notify",
        "tr_confirmations_requested",
        "tr_confirmations_decided",
    ]


def test_revision_0019_indexes_the_words_the_runs_list_reads() -> None:
    """The runs list finds a run's actors through the index only while both say the
    expression alike (the planner matches the text it parses)."""
    index = _revision("0019_run_actors")
    assert "".join(entry_actor().split()) == "".join(index.ENTRY_ACTOR.split())
    assert names_an_actor() == index.NAMES_AN_ACTOR

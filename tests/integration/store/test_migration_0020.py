"""Revision 0020 (whether an attempt is the next one, one function for admission and the
journal), down to 0019 and up again, on a database whose decisions have attempts.

Nothing is rewritten either way. At 0020 the steps answer as the store contract says (a
second attempt while one is in flight and an attempt number past the next are 'stale';
the next attempt is admitted); at 0019 the function is gone and the steps are revision
0015's again, which wrote the check out themselves; upgraded again, they answer the same
on the decisions recorded before."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.intent import Intent
from arvis.lifecycle.ports import LifecycleStore
from arvis.store.database import PgStore
from arvis.store.migrate import downgrade, upgrade
from tests.integration.store.test_lifecycle_store_contract import (
    PLAN,
    admission,
    fresh,
    intent,
    redo,
    refusal,
    settle,
)
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql

FUNCTION = "arvis_next_attempt(text,text,integer)"


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url)
        _sql(url, "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')", PLAN)
        yield url
    finally:
        drop_database(pg_server_url, url)


async def _steps(url: str) -> AsyncIterator[LifecycleStore]:
    store = await PgStore.open(url)
    try:
        yield store.ops
    finally:
        await store.close()


async def _answers(url: str) -> list[str]:
    """A decision's attempts, each step's answer: the admission and the journal's checks
    of whether an attempt is the next one, and what they let through."""
    async for ops in _steps(url):
        first = intent(fresh("run"))
        answers = [(await ops.admit(admission(first))).status]
        answers.append((await ops.admit(admission(redo(first, attempt=2)))).status)
        answers.append((await ops.journal(settle(first, EffectBoundary.EFFECT_FAILED))).status)
        answers.append((await ops.admit(admission(redo(first, attempt=3)))).status)
        second: Intent = redo(first, attempt=2)
        answers.append((await ops.admit(admission(second))).status)
        refused = intent(fresh("run"))
        answers.append((await ops.journal(refusal(refused, attempt=1, bind=True))).status)
        answers.append((await ops.journal(refusal(refused, attempt=3))).status)
        answers.append((await ops.journal(refusal(refused, attempt=2))).status)
    return answers


EXPECTED = ["admitted", "stale", "appended", "stale", "admitted", "appended", "stale", "appended"]


def _has_function(url: str) -> bool:
    return _sql(url, "SELECT to_regprocedure(%s) IS NOT NULL", FUNCTION) == [(True,)]


def _steps_calling_it(url: str) -> list[str]:
    rows = _sql(
        url,
        "SELECT proname FROM pg_proc WHERE proname IN ('arvis_admit', 'arvis_journal')"
        " AND prosrc LIKE '%%arvis_next_attempt(%%' ORDER BY proname",
    )
    return [name for (name,) in rows]


async def test_the_next_attempt_check_goes_down_to_0019_and_back_answering_the_same(
    database: str,
) -> None:
    assert _has_function(database)
    assert _steps_calling_it(database) == ["arvis_admit", "arvis_journal"]
    assert await _answers(database) == EXPECTED

    downgrade(database, "0019")
    assert not _has_function(database)
    assert _steps_calling_it(database) == []

    upgrade(database)
    assert _has_function(database)
    assert _steps_calling_it(database) == ["arvis_admit", "arvis_journal"]
    assert await _answers(database) == EXPECTED
    assert _sql(database, "SELECT count(*) FROM journal_entries") == [(6,)]

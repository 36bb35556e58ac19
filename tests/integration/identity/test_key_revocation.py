"""The API-key cache on PostgreSQL: a revocation reaches every listening process before
``revoke`` returns, and a process whose listener is down trusts no cached key
(arvis.store.keycache; the rules themselves are in tests/unit/store/test_keycache.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import psycopg
import pytest

from arvis.store.database import PgStore
from arvis.store.engine import libpq_url
from arvis.store.keycache import LISTENER_NAME, RevocationListener
from arvis.store.keys import PgKeyStore

pytestmark = pytest.mark.db


class Process:
    """What one serving process holds: its store, its key cache and its listener."""

    def __init__(self, store: PgStore) -> None:
        self.store = store
        self.keys = PgKeyStore(store.engine, store.ops)
        self.listener: RevocationListener = self.keys.listener()


@pytest.fixture
async def processes(database_url: str) -> AsyncIterator[list[Process]]:
    opened = [Process(await PgStore.open(database_url, pool_size=2)) for _ in range(2)]
    try:
        for process in opened:
            await process.listener.start()
        yield opened
    finally:
        for process in opened:
            await process.listener.stop()
            await process.store.close()


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(what)


async def test_a_revocation_empties_every_listening_cache_before_it_returns(
    processes: list[Process],
) -> None:
    first, second = processes
    _, issued = await first.keys.create("acme", "alice", ["agent"])
    for process in processes:
        assert process.keys.cache.live
        assert await process.keys.authenticated(issued.token) is not None
        assert process.keys.cache.get(issued.key_id) is not None

    assert await first.keys.revoke(issued.key_id) is True

    # No waiting here: revoke returned only once both listeners acknowledged.
    for process in processes:
        assert process.keys.cache.get(issued.key_id) is None
        assert await process.keys.authenticated(issued.token) is None
    assert await second.keys.revoke(issued.key_id) is False  # no live key left


async def test_a_revocation_from_a_process_without_a_listener_reaches_the_others(
    database_url: str, processes: list[Process]
) -> None:
    _, issued = await processes[0].keys.create("acme", "bob", ["agent"])
    for process in processes:
        assert await process.keys.authenticated(issued.token) is not None
    admin = await PgStore.open(database_url, pool_size=1)  # like `arvis keys revoke`
    try:
        assert await PgKeyStore(admin.engine, admin.ops).revoke(issued.key_id, "acme")
    finally:
        await admin.close()
    for process in processes:
        assert await process.keys.authenticated(issued.token) is None


async def test_a_listener_that_loses_its_connection_trusts_nothing_until_it_listens_again(
    database_url: str, processes: list[Process]
) -> None:
    process = processes[0]
    _, issued = await process.keys.create("acme", "carol", ["agent"])
    assert await process.keys.authenticated(issued.token) is not None
    assert process.keys.cache.get(issued.key_id) is not None
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (LISTENER_NAME,),
        )
    await _until(lambda: not process.keys.cache.live, "the cache should close")
    assert len(process.keys.cache) == 0
    await _until(lambda: process.keys.cache.live, "the listener should reconnect")
    assert process.keys.cache.get(issued.key_id) is None  # it starts from nothing


async def test_a_revocation_waits_only_so_long_for_a_listener_that_does_not_answer(
    database_url: str, processes: list[Process]
) -> None:
    _, issued = await processes[0].keys.create("acme", "dave", ["agent"])
    # A connection that calls itself a listener but never listens (a stuck process).
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True, application_name=LISTENER_NAME
    ):
        assert await processes[0].keys.revoke(issued.key_id, wait_s=0.3) is True
    for process in processes:
        assert await process.keys.authenticated(issued.token) is None

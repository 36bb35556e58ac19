"""The rules of the API-key cache (arvis.store.keycache), on a fake of the key lookup.

The listener and the revocation's acknowledgements on PostgreSQL are tested in
tests/integration/test_key_revocation.py, and every worker refusing a revoked key at
once in tests/e2e/test_key_revocation_workers.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.apikeys import ApiKeyRecord, issue_token
from arvis.store.keycache import KeyCache
from arvis.store.keys import COLUMN_NAMES, PgKeyStore
from arvis.store.operations import PgOperations

NOW = datetime(2026, 12, 2, tzinfo=UTC)


class FakeKeys:
    """The one lookup a request makes, answering from a dict and counting the reads."""

    def __init__(self) -> None:
        self.rows: dict[str, ApiKeyRecord] = {}
        self.reads = 0
        self.during_read: Callable[[], None] | None = None
        """Runs inside a read: what happens while the statement is on the wire."""

    async def query_one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        self.reads += 1
        if self.during_read is not None:
            self.during_read()
        record = self.rows.get(params[0])
        if record is None:
            return None
        return tuple(getattr(record, name) for name in COLUMN_NAMES)


def _store(cache: KeyCache | None = None) -> tuple[PgKeyStore, FakeKeys, str, str]:
    fake = FakeKeys()
    issued = issue_token()
    fake.rows[issued.key_id] = ApiKeyRecord(
        "acme", issued.key_id, "alice", ("agent",), issued.secret_hash, NOW, None
    )
    store = PgKeyStore(cast(AsyncEngine, None), cast(PgOperations, fake), cache)
    return store, fake, issued.token, issued.key_id


def _revoke(fake: FakeKeys, key_id: str) -> None:
    row = fake.rows[key_id]
    fake.rows[key_id] = ApiKeyRecord(
        row.tenant_id, row.key_id, row.principal, row.roles, row.secret_hash, NOW, NOW
    )


async def test_without_a_listener_every_request_reads_its_key() -> None:
    store, fake, token, key_id = _store()
    assert not store.cache.live
    for _ in range(3):
        assert await store.authenticated(token) is not None
    assert (fake.reads, len(store.cache)) == (3, 0)
    _revoke(fake, key_id)
    assert await store.authenticated(token) is None


async def test_while_listening_a_seen_key_is_answered_without_a_read() -> None:
    store, fake, token, _ = _store()
    store.cache.open()
    first = await store.authenticated(token)
    again = await store.authenticated(token)
    assert first is not None
    assert again == first
    assert fake.reads == 1


async def test_a_cached_key_still_checks_the_presented_secret() -> None:
    store, fake, token, key_id = _store()
    store.cache.open()
    assert await store.authenticated(token) is not None
    forged = f"arvis_{key_id}_{'A' * 43}"
    assert await store.authenticated(forged) is None
    assert fake.reads == 1  # refused from the cached hash, no read needed


async def test_an_evicted_key_is_read_again_and_a_revoked_one_refused() -> None:
    store, fake, token, key_id = _store()
    store.cache.open()
    assert await store.authenticated(token) is not None
    _revoke(fake, key_id)
    store.cache.evict([key_id])
    assert await store.authenticated(token) is None
    assert await store.authenticated(token) is None
    assert (fake.reads, len(store.cache)) == (3, 0)  # a revoked key is never kept


async def test_a_read_that_an_eviction_overtakes_is_not_kept() -> None:
    store, fake, token, key_id = _store()
    store.cache.open()
    # The revocation's notification arrives while the read (which saw the key live) is
    # on the wire: its answer serves this request, which began before the revocation,
    # but must not be kept for the next one.
    fake.during_read = lambda: store.cache.evict([key_id])
    assert await store.authenticated(token) is not None
    fake.during_read = None
    assert len(store.cache) == 0
    _revoke(fake, key_id)
    assert await store.authenticated(token) is None


async def test_losing_the_listener_empties_the_cache_and_bypasses_it() -> None:
    store, fake, token, key_id = _store()
    store.cache.open()
    assert await store.authenticated(token) is not None
    store.cache.close()
    assert len(store.cache) == 0
    _revoke(fake, key_id)  # revoked while nobody listened: no notification reached us
    assert await store.authenticated(token) is None
    assert fake.reads == 2


async def test_a_read_across_a_reconnect_is_not_kept() -> None:
    store, fake, token, _ = _store()
    store.cache.open()

    def reconnect() -> None:
        store.cache.close()
        store.cache.open()

    fake.during_read = reconnect
    assert await store.authenticated(token) is not None
    assert len(store.cache) == 0


async def test_unknown_and_malformed_keys_are_never_kept() -> None:
    store, _, _, _ = _store()
    store.cache.open()
    assert await store.authenticated(f"arvis_k{'0' * 16}_{'A' * 43}") is None
    assert await store.authenticated("not-a-token") is None
    assert await store.authenticated(None) is None
    assert len(store.cache) == 0


def test_the_cache_is_bounded_and_drops_its_oldest_entry() -> None:
    cache = KeyCache(max_entries=2)
    cache.open()
    records = []
    for n in range(3):
        issued = issue_token()
        records.append(
            ApiKeyRecord("acme", issued.key_id, f"p{n}", ("agent",), issued.secret_hash, NOW, None)
        )
        cache.put(records[-1], cache.epoch)
    assert cache.get(records[0].key_id) is None
    assert cache.get(records[1].key_id) is not None
    assert cache.get(records[2].key_id) is not None

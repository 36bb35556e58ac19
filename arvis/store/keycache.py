"""A verified in-process cache of API keys that a revocation empties at once.

Every request presents a key, and reading it from PostgreSQL is a round trip per
request. This cache keeps the keys this process has seen, and is trusted only while
the process listens for revocations (``LISTEN arvis_key_revoked``) on a connection of
its own; there is no time-to-live, because a TTL is a window in which a revoked key
still works. The rules (each tested in tests/unit/store/test_keycache.py):

- **Only while listening.** A process whose listener is not connected and
  ``LISTEN``-ing (starting, reconnecting, a CLI command) has an empty cache and reads
  every key from the database. ``open`` happens only after ``LISTEN`` returned, so any
  revocation that commits later reaches this process; one that committed earlier is
  what every later read sees.
- **Only what a lookup proved.** An entry is a key the database returned live; every
  hit still compares the presented secret with the stored hash (the secret is not
  cached). Unknown, revoked or mismatched keys are never cached.
- **No lookup outruns an invalidation.** A lookup notes the cache's epoch before it
  reads; any eviction, ``open`` or ``close`` since then moves the epoch, and the
  lookup's answer is then used once but not stored. So a read that started before a
  revocation, and returns after its notification evicted the key, cannot put the live
  row back.
- **A revocation is acknowledged.** The listener answers each revocation with a
  notification of its own (``arvis_key_revoked_ack``) after it evicted the key, so the
  revoking command can wait until every listening process dropped the key
  (:mod:`arvis.store.keys`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import NamedTuple

import psycopg

from arvis.domain.apikeys import ApiKeyRecord
from arvis.domain.identity import Identity
from arvis.store.engine import libpq_url

CHANNEL = "arvis_key_revoked"
"""What a revocation notifies, in its own transaction; the payload is the key id."""
ACK_CHANNEL = "arvis_key_revoked_ack"
"""What a listener notifies once it evicted a key; the payload is the key id."""
LISTENER_NAME = "arvis-key-listener"
"""The listener connections' ``application_name``: how a revoker finds whom to wait for."""

log = logging.getLogger("arvis.keys")


class CachedKey(NamedTuple):
    """A live key as a lookup read it: the hash a presented secret must match, and the
    identity it stands for (built once, not per request)."""

    secret_hash: str
    identity: Identity


class KeyCache:
    """The rules of the cache, with no I/O: what the listener and the lookup call."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._entries: dict[str, CachedKey] = {}
        self._max = max_entries
        self._live = False
        self._epoch = 0

    @property
    def live(self) -> bool:
        """True while a listener is connected and listening: only then is anything kept."""
        return self._live

    @property
    def epoch(self) -> int:
        """Moves on every invalidation; a lookup stores its answer only under the epoch it
        started in."""
        return self._epoch

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key_id: str) -> CachedKey | None:
        return self._entries.get(key_id) if self._live else None

    def put(self, record: ApiKeyRecord, epoch: int) -> None:
        """Keep a live key a lookup read, unless anything was invalidated since it began."""
        if not self._live or epoch != self._epoch or record.revoked:
            return
        if record.key_id not in self._entries and len(self._entries) >= self._max:
            # The oldest entry goes: it is read again on its next use.
            self._entries.pop(next(iter(self._entries)))
        self._entries[record.key_id] = CachedKey(record.secret_hash, record.identity())

    def evict(self, key_ids: Iterable[str]) -> None:
        for key_id in key_ids:
            self._entries.pop(key_id, None)
        self._epoch += 1

    def open(self) -> None:
        """The listener is listening: start from nothing."""
        self._entries.clear()
        self._live = True
        self._epoch += 1

    def close(self) -> None:
        """The listener stopped or lost its connection: trust nothing until it is back."""
        self._entries.clear()
        self._live = False
        self._epoch += 1


class RevocationListener:
    """The process's one connection that listens for revocations and empties ``cache``.

    It reconnects with backoff when its connection fails, and checks the connection every
    ``heartbeat_s`` (a silent network failure must not leave the cache trusted): from a
    failure until it listens again, the cache is closed."""

    def __init__(
        self,
        url: str,
        cache: KeyCache,
        *,
        heartbeat_s: float = 5.0,
        retry_s: tuple[float, float] = (0.1, 5.0),
    ) -> None:
        self._url = libpq_url(url)
        self.cache = cache
        self._heartbeat_s = heartbeat_s
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()

    async def start(self, wait_s: float = 5.0) -> None:
        """Start listening; waits up to ``wait_s`` for the first ``LISTEN`` (the cache
        stays closed, and every key is read from the database, until it succeeds)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listening.wait(), wait_s)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.cache.close()

    async def _run(self) -> None:
        delay = self._retry_s[0]
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    application_name=LISTENER_NAME,
                    connect_timeout=5,
                    keepalives_idle=10,
                )
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.cache.open()
                    self._listening.set()
                    delay = self._retry_s[0]
                    await self._listen(conn)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning("key revocation listener lost its connection: %s", exc)
            finally:
                self.cache.close()
                self._listening.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_s[1])

    async def _listen(self, conn: psycopg.AsyncConnection[object]) -> None:
        while True:
            revoked = [
                n.payload
                async for n in conn.notifies(timeout=self._heartbeat_s, stop_after=1)
                if n.channel == CHANNEL
            ]
            if not revoked:
                await asyncio.wait_for(conn.execute("SELECT 1"), self._heartbeat_s)
                continue
            self.cache.evict(revoked)
            for key_id in revoked:
                await conn.execute("SELECT pg_notify(%s, %s)", (ACK_CHANNEL, key_id))

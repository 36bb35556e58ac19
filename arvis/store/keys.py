"""API keys on PostgreSQL. Each method is its own short statement.

Keys are identity administration, not part of a governed effect: creating, listing
and revoking them are administration (:mod:`arvis.store.connections`). Finding a key is on
every request's path, so the one lookup (:meth:`PgKeyStore.authenticated`, which
the API, ``/mcp``, the console and the CLI all use) is one prepared statement on the
lifecycle's pool, or none while this process listens for revocations and has seen the
key (:mod:`arvis.store.keycache`: no TTL; a revocation empties every listening
process's cache before ``revoke`` returns).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.apikeys import (
    ApiKeyRecord,
    IssuedToken,
    issue_token,
    parse_token,
    secret_matches,
)
from arvis.domain.errors import StoreUnavailable
from arvis.domain.identity import Identity, Role
from arvis.store.connections import rows, write
from arvis.store.engine import libpq_url
from arvis.store.keycache import (
    ACK_CHANNEL,
    CHANNEL,
    LISTENER_NAME,
    KeyCache,
    RevocationListener,
)
from arvis.store.operations import PgOperations

COLUMN_NAMES = (
    "tenant_id",
    "key_id",
    "principal",
    "roles",
    "secret_hash",
    "created_at",
    "revoked_at",
    "groups",
    "last_used_at",
)
_COLUMNS = ", ".join(COLUMN_NAMES)


_LOOKUP = f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = %s"
# What a secret is compared with when no key matched, so timing says nothing.
_NO_HASH = "0" * 64
# When a key was last used: once a minute at most, by any number of processes (the
# condition), and each process asks at most once a minute per key (the map).
TOUCH_EVERY_S = 60.0
_TOUCH = (
    "UPDATE api_keys SET last_used_at = now() WHERE key_id = :k AND revoked_at IS NULL"
    " AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
)
_TOUCHED_KEPT = 10_000
log = logging.getLogger(__name__)

# One statement, so one transaction: the notification is sent if and only if the
# revocation commits.
_REVOKE = (
    "WITH revoked AS (UPDATE api_keys SET revoked_at = now() WHERE key_id = %(k)s"
    " AND revoked_at IS NULL AND (%(t)s::text IS NULL OR tenant_id = %(t)s)"
    " RETURNING key_id)"
    f" SELECT pg_notify('{CHANNEL}', key_id) FROM revoked"
)
# The processes whose caches must drop the key: every listener on this database.
_LISTENERS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s"
)
ACK_WAIT_S = 2.0
"""How long a revocation waits for the listening processes to drop the key."""


class PgKeyStore:
    """Creates, finds, lists and revokes API keys. Stores only secret hashes.

    ``pool``: the lifecycle's operations, whose prepared-statement pool the lookup
    every request makes runs on. ``cache``: the keys this process has seen, trusted
    only while its revocation listener runs (a fresh one is empty and closed)."""

    def __init__(
        self, engine: AsyncEngine, pool: PgOperations, cache: KeyCache | None = None
    ) -> None:
        self._engine = engine
        self._pool = pool
        self._touched: dict[str, float] = {}
        self._touching: set[asyncio.Task[None]] = set()
        self.cache = cache if cache is not None else KeyCache()

    @property
    def _url(self) -> str:
        return libpq_url(self._engine.url.render_as_string(hide_password=False))

    def listener(self) -> RevocationListener:
        """This process's revocation listener, which keeps :attr:`cache` honest; the cache
        is used only while it runs (``Kernel.start`` starts it)."""
        return RevocationListener(self._url, self.cache)

    async def create(
        self,
        tenant_id: str,
        principal: str,
        roles: Sequence[Role],
        groups: Sequence[str] = (),
    ) -> tuple[ApiKeyRecord, IssuedToken]:
        """A new key; the returned token is the only copy of its secret. ``groups`` are
        the approver groups it belongs to (issue 16)."""
        issued = issue_token()
        (row,) = await rows(
            self._engine,
            text(
                "INSERT INTO api_keys (tenant_id, key_id, principal, roles, secret_hash, groups)"
                f" VALUES (:t, :k, :p, :r, :h, :g) RETURNING {_COLUMNS}"
            ),
            {
                "t": tenant_id,
                "k": issued.key_id,
                "p": principal,
                "r": sorted(set(roles)),
                "h": issued.secret_hash,
                "g": sorted(set(groups)),
            },
            write=True,
        )
        return key_record(row), issued

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        """The key ``key_id`` as stored (revoked or not), or None."""
        found = await self._pool.query_one(_LOOKUP, (key_id,))
        return None if found is None else key_record(dict(zip(COLUMN_NAMES, found, strict=True)))

    async def authenticated(self, token: str | None, *, note_use: bool = True) -> Identity | None:
        """Who a bearer token is, or None: missing, malformed, unknown, wrong secret or
        revoked, all alike. The one check of a key, for every entry point. ``note_use``
        False: a check that is no use of the key (the quick start's saved demo keys)."""
        presented = parse_token(token) if token is not None else None
        if presented is None:
            return None
        cached = self.cache.get(presented.key_id)
        if cached is not None:
            if not secret_matches(presented.secret, cached.secret_hash):
                return None
            if note_use:
                self._note_use(presented.key_id)
            return cached.identity
        epoch = self.cache.epoch
        record = await self.get(presented.key_id)
        # Compare even when the key is unknown or revoked, so timing says nothing.
        matches = secret_matches(presented.secret, record.secret_hash if record else _NO_HASH)
        if record is None or record.revoked or not matches:
            return None
        if note_use:
            self._note_use(record.key_id)
        self.cache.put(record, epoch)
        return record.identity()

    def _note_use(self, key_id: str) -> None:
        """Record that the key was used, after the request's lookup and beside it: a
        task of its own on the administration engine, never one of the request's
        statements, and at most once a minute per key."""
        now = time.monotonic()
        last = self._touched.get(key_id)
        if last is not None and now - last < TOUCH_EVERY_S:
            return
        if len(self._touched) >= _TOUCHED_KEPT:
            self._touched.clear()
        self._touched[key_id] = now
        task = asyncio.get_running_loop().create_task(self._touch(key_id))
        self._touching.add(task)
        task.add_done_callback(self._touching.discard)

    async def settle_touches(self) -> None:
        """Wait for the last-use writes under way (at shutdown, and in tests)."""
        if self._touching:
            await asyncio.gather(*self._touching, return_exceptions=True)

    async def _touch(self, key_id: str) -> None:
        try:
            await write(self._engine, text(_TOUCH), {"k": key_id})
        except Exception:  # a lost last-use time is not worth a failed request
            log.warning("could not record when key %s was last used", key_id, exc_info=True)

    async def list(self, tenant_id: str | None = None) -> list[ApiKeyRecord]:
        found = await rows(
            self._engine,
            text(
                f"SELECT {_COLUMNS} FROM api_keys WHERE cast(:t AS text) IS NULL OR tenant_id = :t"
                " ORDER BY tenant_id, created_at, key_id"
            ),
            {"t": tenant_id},
        )
        return [key_record(row) for row in found]

    async def revoke(
        self, key_id: str, tenant_id: str | None = None, *, wait_s: float = ACK_WAIT_S
    ) -> bool:
        """Revoke a key (of ``tenant_id`` when given); False when there is no such live key.

        The revocation notifies every process listening on this database in its own
        transaction, and returns once each of them acknowledged that it dropped the key
        from its cache (or after ``wait_s``, saying which did not, in the log): so the
        next request with the key is refused by every worker."""
        self.cache.evict((key_id,))
        try:
            async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                # Listening before the revocation commits: no acknowledgement is missed.
                await conn.execute(f"LISTEN {ACK_CHANNEL}")
                revoked = await (
                    await conn.execute(_REVOKE, {"k": key_id, "t": tenant_id})
                ).fetchone()
                if revoked is None:
                    return False
                await _acknowledged(conn, key_id, wait_s)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable("the database is unreachable") from exc
        return True


async def _acknowledged(conn: psycopg.AsyncConnection[Any], key_id: str, wait_s: float) -> None:
    """Wait until every listener on the database acknowledged ``key_id``'s revocation.

    Who must answer is asked again on every pass, so a listener that went away (its
    process is gone, or it reconnects with an empty cache) is not waited for."""
    acked: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        rows = await (await conn.execute(_LISTENERS, (LISTENER_NAME,))).fetchall()
        pending = {int(row[0]) for row in rows} - acked
        remaining = deadline - time.monotonic()
        if not pending:
            return
        if remaining <= 0:
            log.warning(
                "revoked key %s: %d listening process(es) did not confirm within %.1f s"
                " (backend pids %s); each drops it when its listener catches up",
                key_id,
                len(pending),
                wait_s,
                sorted(pending),
            )
            return
        # Never break out of notifies(): the generator holds the connection's lock
        # until it ends; stop_after ends it after the first batch.
        async for note in conn.notifies(timeout=min(remaining, 0.25), stop_after=1):
            if note.channel == ACK_CHANNEL and note.payload == key_id:
                acked.add(note.pid)


def key_record(data: Mapping[str, Any] | RowMapping) -> ApiKeyRecord:
    same = ("tenant_id", "key_id", "principal", "secret_hash", "created_at", "revoked_at")
    return ApiKeyRecord(
        **{name: data[name] for name in same},
        roles=tuple(data["roles"]),
        groups=tuple(data.get("groups") or ()),
        last_used_at=data.get("last_used_at"),
    )

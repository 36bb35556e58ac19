"""API keys on PostgreSQL. Each method is its own short statement.

Keys are identity administration, not part of a governed effect: creating, listing
and revoking them are administration (:mod:`arvis.store.connections`). Finding a key is on
every request's path, so the one lookup (:meth:`PgKeyStore.authenticated`, which
the API, ``/mcp``, the console and the CLI all use) is one prepared statement on the
lifecycle's pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

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
from arvis.domain.identity import Identity, Role
from arvis.store.connections import translated
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


class PgKeyStore:
    """Creates, finds, lists and revokes API keys. Stores only secret hashes.

    ``pool``: the lifecycle's operations, whose prepared-statement pool the lookup
    every request makes runs on."""

    def __init__(self, engine: AsyncEngine, pool: PgOperations) -> None:
        self._engine = engine
        self._pool = pool
        self._touched: dict[str, float] = {}
        self._touching: set[asyncio.Task[None]] = set()

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
        async with translated(self._engine, write=True) as conn:
            row = (
                (
                    await conn.execute(
                        text(
                            "INSERT INTO api_keys"
                            " (tenant_id, key_id, principal, roles, secret_hash, groups)"
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
                    )
                )
                .mappings()
                .one()
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
        record = await self.get(presented.key_id)
        # Compare even when the key is unknown or revoked, so timing says nothing.
        matches = secret_matches(presented.secret, record.secret_hash if record else _NO_HASH)
        if record is None or record.revoked or not matches:
            return None
        if note_use:
            self._note_use(record.key_id)
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
            async with translated(self._engine, write=True) as conn:
                await conn.execute(text(_TOUCH), {"k": key_id})
        except Exception:  # a lost last-use time is not worth a failed request
            log.warning("could not record when key %s was last used", key_id, exc_info=True)

    async def list(self, tenant_id: str | None = None) -> list[ApiKeyRecord]:
        async with translated(self._engine, write=False) as conn:
            rows = (
                (
                    await conn.execute(
                        text(
                            f"SELECT {_COLUMNS} FROM api_keys"
                            " WHERE cast(:t AS text) IS NULL OR tenant_id = :t"
                            " ORDER BY tenant_id, created_at, key_id"
                        ),
                        {"t": tenant_id},
                    )
                )
                .mappings()
                .all()
            )
        return [key_record(row) for row in rows]

    async def revoke(self, key_id: str, tenant_id: str | None = None) -> bool:
        """Revoke a key (of ``tenant_id`` when given); False when there is no such live key."""
        async with translated(self._engine, write=True) as conn:
            result = await conn.execute(
                text(
                    "UPDATE api_keys SET revoked_at = now() WHERE key_id = :k"
                    " AND revoked_at IS NULL AND (cast(:t AS text) IS NULL OR tenant_id = :t)"
                ),
                {"k": key_id, "t": tenant_id},
            )
        return int(result.rowcount) == 1


def key_record(data: Mapping[str, Any] | RowMapping) -> ApiKeyRecord:
    same = ("tenant_id", "key_id", "principal", "secret_hash", "created_at", "revoked_at")
    return ApiKeyRecord(
        **{name: data[name] for name in same},
        roles=tuple(data["roles"]),
        groups=tuple(data.get("groups") or ()),
        last_used_at=data.get("last_used_at"),
    )

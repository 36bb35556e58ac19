"""API keys on PostgreSQL. Each method is its own short statement.

Keys are identity administration, not part of a governed effect: creating, listing
and revoking them are administration (:mod:`arvis.store.connections`). Finding a key is on
every request's path, so the one lookup (:meth:`PgKeyStore.authenticated`, which
the API, ``/mcp``, the console and the CLI all use) is one prepared statement on the
lifecycle's pool.
"""

from __future__ import annotations

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
)
_COLUMNS = ", ".join(COLUMN_NAMES)


_LOOKUP = f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = %s"
# What a secret is compared with when no key matched, so timing says nothing.
_NO_HASH = "0" * 64


class PgKeyStore:
    """Creates, finds, lists and revokes API keys. Stores only secret hashes.

    ``pool``: the lifecycle's operations, whose prepared-statement pool the lookup
    every request makes runs on."""

    def __init__(self, engine: AsyncEngine, pool: PgOperations) -> None:
        self._engine = engine
        self._pool = pool

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

    async def authenticated(self, token: str | None) -> Identity | None:
        """Who a bearer token is, or None: missing, malformed, unknown, wrong secret or
        revoked, all alike. The one check of a key, for every entry point."""
        presented = parse_token(token) if token is not None else None
        if presented is None:
            return None
        record = await self.get(presented.key_id)
        # Compare even when the key is unknown or revoked, so timing says nothing.
        matches = secret_matches(presented.secret, record.secret_hash if record else _NO_HASH)
        if record is None or record.revoked or not matches:
            return None
        return record.identity()

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
    )

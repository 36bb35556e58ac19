"""API keys on PostgreSQL. Each method is its own short transaction.

Keys are identity administration, not part of a governed effect, so they live
beside the lifecycle's store operations rather than inside them (like the plan store).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from arvis.domain.apikeys import IssuedToken, issue_token
from arvis.domain.identity import Identity, Role
from arvis.domain.ids import PrincipalId, TenantId
from arvis.store.connections import translated
from arvis.store.operations import PgOperations

ROLES: tuple[Role, ...] = ("agent", "approver", "auditor", "admin")


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    tenant_id: str
    key_id: str
    principal: str
    roles: tuple[Role, ...]
    secret_hash: str
    created_at: datetime
    revoked_at: datetime | None
    groups: tuple[str, ...] = ()
    """Approver groups (revision 0006)."""

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def identity(self) -> Identity:
        """Who a request authenticated by this key is: the one mapping from a key to an
        identity, for the API and the console alike."""
        return Identity(
            tenant_id=TenantId(self.tenant_id),
            principal_id=PrincipalId(self.principal),
            method="api_key",
            key_id=self.key_id,
            roles=self.roles,
            groups=self.groups,
        )


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


class PgKeyStore:
    """Creates, finds, lists and revokes API keys. Stores only secret hashes."""

    def __init__(self, engine: AsyncEngine, fast: PgOperations | None = None) -> None:
        self._engine = engine
        # Every request looks its key up: on the hot path's prepared-statement pool
        # when there is one.
        self._fast = fast

    def _connection(self, *, write: bool) -> AbstractAsyncContextManager[AsyncConnection]:
        return translated(self._engine, write=write)

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
        async with self._connection(write=True) as conn:
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
        return _record(row), issued

    async def get(self, key_id: str) -> ApiKeyRecord | None:
        if self._fast is not None:
            found = await self._fast.query_one(
                f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = %s", (key_id,)
            )
            if found is None:
                return None
            return _record(dict(zip(COLUMN_NAMES, found, strict=True)))
        async with self._connection(write=False) as conn:
            row = (
                (
                    await conn.execute(
                        text(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = :k"), {"k": key_id}
                    )
                )
                .mappings()
                .first()
            )
        return None if row is None else _record(row)

    async def list(self, tenant_id: str | None = None) -> list[ApiKeyRecord]:
        async with self._connection(write=False) as conn:
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
        return [_record(row) for row in rows]

    async def revoke(self, key_id: str, tenant_id: str | None = None) -> bool:
        """Revoke a key (of ``tenant_id`` when given); False when there is no such live key."""
        async with self._connection(write=True) as conn:
            result = await conn.execute(
                text(
                    "UPDATE api_keys SET revoked_at = now() WHERE key_id = :k"
                    " AND revoked_at IS NULL AND (cast(:t AS text) IS NULL OR tenant_id = :t)"
                ),
                {"k": key_id, "t": tenant_id},
            )
        return int(result.rowcount) == 1


def _record(data: Mapping[str, Any] | RowMapping) -> ApiKeyRecord:
    same = ("tenant_id", "key_id", "principal", "secret_hash", "created_at", "revoked_at")
    return ApiKeyRecord(
        **{name: data[name] for name in same},
        roles=tuple(data["roles"]),
        groups=tuple(data.get("groups") or ()),
    )

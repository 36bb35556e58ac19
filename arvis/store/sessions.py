"""Operator console sessions on PostgreSQL (revisions 0009, 0017). Each method is one
statement.

Like API keys, sessions are identity administration beside the lifecycle, not part of
a governed effect. Only a digest of the session token is stored, and a session is
found only while it has not expired by the database's clock and, for a session of a
key, its key is live. A session of an ID token (OpenID sign-in) stores the identity
the verified token gave; it lasts its ttl or until signed out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.identity import Identity
from arvis.store.connections import rows, translated
from arvis.store.keys import COLUMN_NAMES, key_record


@dataclass(frozen=True, slots=True)
class SessionRecord:
    identity: Identity
    """The live key's identity as it is now (roles, groups), or the ID token's."""
    expires_at: datetime


_COLUMN_NAMES = ", ".join(f"k.{name}" for name in COLUMN_NAMES)


class PgSessionStore:
    """Creates, finds and ends console sessions by the digest of their token."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(
        self,
        tenant_id: str,
        key_id: str | None,
        token_hash: str,
        ttl_s: float,
        identity: Identity | None = None,
    ) -> datetime:
        """A session of the key (or, ``key_id`` None, of ``identity``) for ``ttl_s``
        seconds; answers when it expires. Sessions that have expired are deleted on the
        way (their rows would only accumulate)."""
        async with translated(self._engine, write=True) as conn:
            await conn.execute(text("DELETE FROM console_sessions WHERE expires_at <= now()"))
            expires: datetime = (
                await conn.execute(
                    text(
                        "INSERT INTO console_sessions"
                        " (tenant_id, token_hash, key_id, identity, expires_at)"
                        " VALUES (:t, :h, :k, CAST(:i AS jsonb),"
                        " now() + make_interval(secs => :ttl))"
                        " RETURNING expires_at"
                    ),
                    {
                        "t": tenant_id,
                        "h": token_hash,
                        "k": key_id,
                        "i": None if identity is None else identity.model_dump_json(),
                        "ttl": ttl_s,
                    },
                )
            ).scalar_one()
        return expires

    async def find(self, token_hash: str) -> SessionRecord | None:
        """The session and its identity, unless it expired or its key was revoked."""
        found = await rows(
            self._engine,
            text(
                f"SELECT {_COLUMN_NAMES}, s.expires_at AS session_expires_at,"
                " s.identity AS session_identity"
                " FROM console_sessions s LEFT JOIN api_keys k"
                " ON k.tenant_id = s.tenant_id AND k.key_id = s.key_id"
                " WHERE s.token_hash = :h AND s.expires_at > now()"
                " AND (s.identity IS NOT NULL OR (k.key_id IS NOT NULL AND k.revoked_at IS NULL))"
            ),
            {"h": token_hash},
        )
        row = found[0] if found else None
        if row is None:
            return None
        stored = row["session_identity"]
        identity = key_record(row).identity() if stored is None else Identity.model_validate(stored)
        return SessionRecord(identity=identity, expires_at=row["session_expires_at"])

    async def end(self, token_hash: str) -> bool:
        """Delete the session; False when there was none."""
        async with translated(self._engine, write=True) as conn:
            result = await conn.execute(
                text("DELETE FROM console_sessions WHERE token_hash = :h"), {"h": token_hash}
            )
        return int(result.rowcount) == 1

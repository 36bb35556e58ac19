"""API key tokens: ``arvis_<key_id>_<secret>``.

The key id is public (it names the key in logs, listings and audit records);
the secret is 32 random bytes, shown once and stored only as its SHA-256.
A plain digest suffices because the secret has 256 bits of entropy: there is
nothing to brute-force that a slow hash would protect.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from arvis.domain.identity import Identity, Role
from arvis.domain.ids import PrincipalId, TenantId

TOKEN_PREFIX = "arvis_"
_TOKEN = re.compile(r"^arvis_(k[0-9a-f]{16})_([A-Za-z0-9_-]{43,128})$")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    key_id: str
    secret_hash: str
    token: str
    """The bearer token; shown once, never stored."""


@dataclass(frozen=True, slots=True)
class PresentedToken:
    key_id: str
    secret: str


def issue_token() -> IssuedToken:
    key_id = f"k{secrets.token_hex(8)}"
    secret = secrets.token_urlsafe(32)
    return IssuedToken(key_id, hash_secret(secret), f"{TOKEN_PREFIX}{key_id}_{secret}")


def parse_token(token: str) -> PresentedToken | None:
    """The key id and secret of a well-formed token, else ``None``."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        return None
    return PresentedToken(match.group(1), match.group(2))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def secret_matches(secret: str, secret_hash: str) -> bool:
    """Constant-time comparison of a presented secret with a stored hash."""
    return hmac.compare_digest(hash_secret(secret), secret_hash)


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
    last_used_at: datetime | None = None
    """When it was last used, to within a minute (revision 0016); None: not since."""

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def state(self) -> Literal["active", "revoked"]:
        """What the key listings say of it (``GET /v1/keys``, the console's Keys page)."""
        return "revoked" if self.revoked else "active"

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

"""An issuer's signing keys: discovery document, then its ``jwks_uri``, cached.

Keys are fetched on the first token of an issuer, kept for ``jwks_ttl_s``, and refetched
when a token names a ``kid`` the cached set lacks (the issuer rotated), at most once per
``jwks_min_refresh_s``: a stream of tokens with invented ``kid`` values cannot make ARVIS
hammer the issuer. A failed fetch is :class:`IdentityProviderUnavailable` (503), never an
answer about the token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import Key, KeySet, KeySetSerialization

from arvis.identity.config import OidcIssuer
from arvis.identity.errors import IdentityProviderUnavailable

MAX_DOCUMENT_BYTES = 512 * 1024


@dataclass
class IssuerKeys:
    """The published keys of one issuer, as this process last fetched them."""

    issuer: OidcIssuer
    http: httpx.AsyncClient
    monotonic: Callable[[], float] = time.monotonic
    _keys: KeySet | None = None
    _fetched_at: float = float("-inf")
    _jwks_uri: str | None = None
    _document: dict[str, Any] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    fetches: int = 0
    """How many times the key set was fetched (for tests and metrics)."""

    async def key(self, kid: str | None) -> Key | None:
        """The key ``kid`` names (the only key, when ``kid`` is absent and there is one);
        None when the issuer publishes no such key even after a refetch."""
        keys = await self._current()
        found = _find(keys, kid)
        if found is not None:
            return found
        async with self._lock:
            if self.monotonic() - self._fetched_at >= self.issuer.jwks_min_refresh_s:
                await self._fetch()
            assert self._keys is not None
            return _find(self._keys, kid)

    async def _current(self) -> KeySet:
        if self._keys is not None and self.monotonic() - self._fetched_at < self.issuer.jwks_ttl_s:
            return self._keys
        async with self._lock:
            stale = self.monotonic() - self._fetched_at >= self.issuer.jwks_ttl_s
            if self._keys is None or stale:
                await self._fetch()
            assert self._keys is not None
            return self._keys

    async def discovery(self) -> dict[str, Any]:
        """The issuer's discovery document (fetched once, then kept)."""
        if self._document is None:
            document = await self._get(self.issuer.discovery_url)
            # OpenID Connect Discovery §4.3: the document must name the issuer it is for.
            if document.get("issuer") != self.issuer.issuer:
                raise IdentityProviderUnavailable(
                    f"the discovery document of {self.issuer.issuer} names another issuer"
                )
            self._document = document
        return self._document

    async def _fetch(self) -> None:
        if self._jwks_uri is None:
            document = await self.discovery()
            uri = document.get("jwks_uri")
            if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
                raise IdentityProviderUnavailable(
                    f"the discovery document of {self.issuer.issuer} has no jwks_uri"
                )
            self._jwks_uri = uri
        published = await self._get(self._jwks_uri)
        try:
            # Whatever the provider published: the library checks its shape.
            keys = KeySet.import_key_set(cast(KeySetSerialization, published))
        except (JoseError, KeyError, TypeError, ValueError):
            raise IdentityProviderUnavailable(
                f"the keys of {self.issuer.issuer} are not a JWK set"
            ) from None
        self._keys = keys
        self._fetched_at = self.monotonic()
        self.fetches += 1

    async def _get(self, url: str) -> dict[str, Any]:
        try:
            answer = await self.http.get(
                url, timeout=self.issuer.timeout_s, headers={"Accept": "application/json"}
            )
            if answer.status_code != 200 or len(answer.content) > MAX_DOCUMENT_BYTES:
                raise IdentityProviderUnavailable(
                    f"{url} answered {answer.status_code}; the issuer's keys are unavailable"
                )
            body = answer.json()
        except httpx.HTTPError:
            raise IdentityProviderUnavailable(
                f"{url} could not be reached; the issuer's keys are unavailable"
            ) from None
        except ValueError:
            raise IdentityProviderUnavailable(f"{url} did not answer JSON") from None
        if not isinstance(body, dict):
            raise IdentityProviderUnavailable(f"{url} did not answer a JSON object")
        return body


def _find(keys: KeySet, kid: str | None) -> Key | None:
    if kid is None:
        return keys.keys[0] if len(keys.keys) == 1 else None
    for key in keys.keys:
        if key.kid == kid:
            return key
    return None

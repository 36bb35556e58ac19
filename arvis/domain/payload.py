"""Frozen effect payloads (DESIGN §1): the caller's JSON, canonicalised once.

Everything downstream of admission — schema checks, the idempotency key, the
intent, the tool body — uses these bytes, never the caller's object, so a
caller that mutates its dict after submitting cannot change what runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from arvis.domain.canonical import canonical_bytes, check_json, sha256_hex
from arvis.domain.errors import PayloadError

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
DEFAULT_MAX_PAYLOAD_DEPTH = 64


@dataclass(frozen=True, slots=True)
class FrozenEffectPayload:
    """RFC 8785 canonical bytes of a payload and their SHA-256 digest.

    Build one with :func:`freeze_payload` (from a JSON value) or
    :meth:`from_canonical` (from stored bytes); both check every rule.
    """

    canonical: bytes
    """The JCS serialisation: key order and whitespace never reach these bytes."""
    digest: str
    """Lowercase hex SHA-256 of :attr:`canonical`."""

    def __post_init__(self) -> None:
        # Cheap invariant so a hand-built payload cannot carry someone else's digest.
        if sha256_hex(self.canonical) != self.digest:
            raise PayloadError("digest does not match the canonical bytes")

    @property
    def value(self) -> Any:
        """A fresh decoded copy; mutating it changes nothing here."""
        return json.loads(self.canonical)

    @property
    def size(self) -> int:
        return len(self.canonical)

    @classmethod
    def from_canonical(
        cls,
        data: bytes,
        *,
        max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_depth: int = DEFAULT_MAX_PAYLOAD_DEPTH,
    ) -> FrozenEffectPayload:
        """Rebuild a payload from stored bytes, refusing bytes that are not canonical."""
        if len(data) > max_bytes:
            raise PayloadError(f"larger than {max_bytes} bytes")
        try:
            value = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise PayloadError("stored bytes are not JSON") from None
        frozen = freeze_payload(value, max_bytes=max_bytes, max_depth=max_depth)
        if frozen.canonical != data:
            raise PayloadError("stored bytes are not in RFC 8785 canonical form")
        return frozen

    def __repr__(self) -> str:
        return f"FrozenEffectPayload(digest={self.digest[:12]}…, size={len(self.canonical)})"


def freeze_payload(
    value: Any,
    *,
    max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    max_depth: int = DEFAULT_MAX_PAYLOAD_DEPTH,
) -> FrozenEffectPayload:
    """Canonicalise ``value`` with RFC 8785 and digest it.

    Raises :class:`PayloadError` for anything that is not plain JSON (NaN,
    Infinity, integers beyond ±2^53-1, non-string keys, bytes, other objects),
    for nesting deeper than ``max_depth`` and for more than ``max_bytes``
    canonical bytes.
    """
    check_json(value, max_depth=max_depth)
    data = canonical_bytes(value)
    if len(data) > max_bytes:
        raise PayloadError(f"larger than {max_bytes} bytes once canonicalised")
    return FrozenEffectPayload(canonical=data, digest=sha256_hex(data))

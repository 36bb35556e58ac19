"""RFC 8785 (JCS) canonical JSON and its SHA-256 digest.

Everything downstream of a decision uses these bytes, never the caller's object.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import rfc8785

from arvis.domain.errors import PayloadError

# Integers beyond this magnitude cannot be represented exactly by an IEEE double,
# so two JSON parsers could disagree on them; JCS forbids them.
MAX_SAFE_INTEGER = 2**53 - 1


def check_json(value: Any, *, max_depth: int, path: str = "$", depth: int = 0) -> None:
    """Raise PayloadError unless ``value`` is plain JSON no deeper than ``max_depth``."""
    if depth > max_depth:
        raise PayloadError(f"nested deeper than {max_depth} levels", path)
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        _check_text(value, path, "strings")
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise PayloadError("integer outside the exactly representable range (±2^53-1)", path)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadError("NaN and Infinity are not JSON", path)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(f"object key {key!r} is not a string", path)
            _check_text(key, path, "object keys")
            check_json(item, max_depth=max_depth, path=f"{path}.{key}", depth=depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_json(item, max_depth=max_depth, path=f"{path}[{index}]", depth=depth + 1)
        return
    raise PayloadError(f"{type(value).__name__} is not a JSON value", path)


def _check_text(text: str, path: str, what: str) -> None:
    # PostgreSQL text and jsonb cannot hold U+0000, and a lone surrogate is not
    # Unicode at all: refuse both before anything is recorded, rather than fail
    # after a tool has run.
    if "\x00" in text:
        raise PayloadError(f"{what} may not contain U+0000", path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadError(f"{what} may not contain unpaired surrogates", path) from None


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 serialisation of an already checked JSON value."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:  # e.g. a lone surrogate in a string
        raise PayloadError(str(exc)) from exc


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()

"""RFC 8785 (JCS) canonical JSON and its SHA-256 digest.

Everything downstream of a decision uses these bytes, never the caller's object.
"""

from __future__ import annotations

import hashlib
import json
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


# For values without floats, with exactly representable integers and ASCII object
# keys, the standard library's C encoder writes RFC 8785's bytes: the same
# escapes (the two-character forms and lowercase \u00xx for other controls,
# nothing else), code-point key order (UTF-16 order for ASCII keys) and integer
# forms. Everything else goes through rfc8785, the reference implementation.
_PLAIN = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 serialisation of an already checked JSON value."""
    if _plain(value):
        try:
            return _PLAIN.encode(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 names the problem
    try:
        return rfc8785.dumps(value)
    # e.g. a lone surrogate in a string (CanonicalizationError) or in a key,
    # which rfc8785 meets while sorting (UnicodeEncodeError)
    except (rfc8785.CanonicalizationError, UnicodeError) as exc:
        raise PayloadError(str(exc)) from exc


def canonical_flat(fields: dict[str, str | int]) -> bytes:
    """:func:`canonical_bytes` of a flat object of ASCII keys, texts and integers (an
    intent's commitment fields), without walking it first: the same bytes, cheaper."""
    for value in fields.values():
        if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return canonical_bytes(fields)
    try:
        return _PLAIN.encode(fields).encode("utf-8")
    except UnicodeEncodeError:
        return canonical_bytes(fields)


_PLAIN_NODES = 100_000


def _plain(value: Any) -> bool:
    """True when ``value`` holds only exact str, bool, None, safe int, list, tuple
    and dict with ASCII string keys (no subclasses, no floats). Huge (or cyclic)
    values answer False and take the reference path."""
    stack = [value]
    budget = _PLAIN_NODES
    while stack:
        budget -= 1
        if budget < 0:
            return False
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or not key.isascii():
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()

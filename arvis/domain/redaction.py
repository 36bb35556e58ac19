"""Fields of a payload never stored in clear (``[journal] redact`` in ``arvis.toml``).

ARVIS keeps each decision's frozen arguments with its record (the ``decisions`` row, a
confirmation) so an auditor sees what a call was asked to do. A field named here is kept
as ``{"$redacted": "sha256:<hex>"}`` instead: the SHA-256 of the field's canonical
(RFC 8785) value. Everything that decides and everything the chain hashes use the clear
payload's digest, taken before redaction, so the idempotency key, the entries and their
verification are the same with or without the rule; the tool receives the clear payload
in memory and it is never written.

A path is dot-separated object keys (``card.number``); where a step meets an array the
rest of the path applies to each element (``items.secret``); ``*`` is any key of an object
(``headers.*``). A path that is not there changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.errors import ConfigurationError

REDACTED = "$redacted"
_SEGMENT = re.compile(r"^(\*|[^.*]{1,128})$")
MAX_PATHS = 64


def redacted_value(value: Any) -> dict[str, str]:
    """What a redacted field is stored as: its canonical value's digest."""
    return {REDACTED: "sha256:" + sha256_hex(canonical_bytes(value))}


def is_redacted(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {REDACTED}


class JournalSection(BaseModel):
    """``[journal]`` of ``arvis.toml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    redact: tuple[str, ...] = Field(default=(), max_length=MAX_PATHS)
    """Payload fields never stored in clear, by path (every tool's payload)."""

    @field_validator("redact")
    @classmethod
    def _paths(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for path in paths:
            if not all(_SEGMENT.fullmatch(part) for part in path.split(".")):
                raise ValueError(
                    f"{path!r} is not a field path (keys separated by '.', '*' for any key)"
                )
        return paths


@dataclass(frozen=True, slots=True)
class Redaction:
    """The rule of a deployment: which paths are stored as their digest."""

    paths: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_section(cls, raw: dict[str, Any]) -> Redaction:
        try:
            section = JournalSection.model_validate(raw)
        except ValueError as exc:
            raise ConfigurationError(f"[journal] {_first_error(exc)}") from None
        return cls(tuple(tuple(path.split(".")) for path in section.redact))

    def __bool__(self) -> bool:
        return bool(self.paths)

    def apply(self, payload: Any) -> Any:
        """``payload`` with every named field replaced by its digest (a new value)."""
        for path in self.paths:
            payload = _redact(payload, path)
        return payload


def _redact(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, list):
        return [_redact(item, path) for item in value]
    if not isinstance(value, dict) or not path:
        return value
    head, rest = path[0], path[1:]
    out = dict(value)
    for key in list(out) if head == "*" else [head] if head in out else []:
        out[key] = _redact(out[key], rest) if rest else redacted_value(out[key])
    return out


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{where}: {message}" if where else message
    return str(exc)

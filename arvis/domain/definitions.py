"""Tool definitions (DESIGN §1, §3): immutable, self-validating, fingerprinted."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from arvis.domain.canonical import canonical_bytes, check_json, sha256_hex
from arvis.domain.errors import DefinitionError, PayloadError

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
CAPABILITY_TAG = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32

# Capabilities no read-only tool may hold (DESIGN §3).
WRITE_CAPABILITIES = frozenset(
    {"filesystem.write", "process.execute", "network.access", "environment.write"}
)


class Effect(StrEnum):
    READ_ONLY = "read_only"
    MUTATING = "mutating"


class ReplaySafety(StrEnum):
    SAFE = "safe"
    IDEMPOTENT = "idempotent"
    UNSAFE = "unsafe"


class ToolDefinition:
    """What a tool is, as the governance layer sees it. Immutable once built.

    Construction checks every rule of DESIGN §3 and fails with a
    :class:`DefinitionError` naming the tool and the rule it broke.
    """

    __slots__ = (
        "_schema_bytes",
        "capabilities",
        "description",
        "effect",
        "fingerprint",
        "name",
        "replay_safety",
    )

    name: str
    description: str
    effect: Effect
    replay_safety: ReplaySafety
    capabilities: tuple[str, ...]
    fingerprint: str
    _schema_bytes: bytes

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        effect: Effect | str,
        replay_safety: ReplaySafety | str,
        capabilities: Iterable[str] = (),
    ) -> None:
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise DefinitionError(str(name), "name must match ^[a-z][a-z0-9_.-]{0,63}$")
        if not isinstance(description, str) or not description.strip():
            raise DefinitionError(name, "description must be a non-empty string")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise DefinitionError(name, f"description longer than {MAX_DESCRIPTION_CHARS} chars")
        try:
            effect = Effect(effect)
        except ValueError:
            raise DefinitionError(
                name, f"effect must be one of {[e.value for e in Effect]}"
            ) from None
        try:
            replay_safety = ReplaySafety(replay_safety)
        except ValueError:
            raise DefinitionError(
                name, f"replay_safety must be one of {[r.value for r in ReplaySafety]}"
            ) from None
        schema_bytes = _check_schema(name, input_schema)
        tags = _normalise_capabilities(name, capabilities)
        _check_contradictions(name, effect, replay_safety, tags)

        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "description", description)
        set_(self, "effect", effect)
        set_(self, "replay_safety", replay_safety)
        set_(self, "capabilities", tags)
        set_(self, "_schema_bytes", schema_bytes)
        set_(self, "fingerprint", sha256_hex(canonical_bytes(self._canonical_form())))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"ToolDefinition is immutable (tried to set {key!r})")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"ToolDefinition is immutable (tried to delete {key!r})")

    @property
    def input_schema(self) -> dict[str, Any]:
        """A fresh copy of the JSON input schema; mutating it changes nothing here."""
        loaded: dict[str, Any] = json.loads(self._schema_bytes)
        return loaded

    @property
    def read_only(self) -> bool:
        return self.effect is Effect.READ_ONLY

    def _canonical_form(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": json.loads(self._schema_bytes),
            "effect": self.effect.value,
            "replay_safety": self.replay_safety.value,
            "capabilities": list(self.capabilities),
        }

    def to_dict(self) -> dict[str, Any]:
        """The canonical form plus the fingerprint: what plans persist and routes show."""
        return {**self._canonical_form(), "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolDefinition:
        """Rebuild a definition from :meth:`to_dict`, checking the stored fingerprint."""
        definition = cls(
            name=data["name"],
            description=data["description"],
            input_schema=data["input_schema"],
            effect=data["effect"],
            replay_safety=data["replay_safety"],
            capabilities=data.get("capabilities", ()),
        )
        stored = data.get("fingerprint")
        if stored is not None and stored != definition.fingerprint:
            raise DefinitionError(definition.name, "stored fingerprint does not match definition")
        return definition

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolDefinition) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return (
            f"ToolDefinition(name={self.name!r}, effect={self.effect.value}, "
            f"replay_safety={self.replay_safety.value}, capabilities={list(self.capabilities)}, "
            f"fingerprint={self.fingerprint[:12]}…)"
        )

    def __copy__(self) -> ToolDefinition:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> ToolDefinition:
        return self


def _check_schema(name: str, schema: Mapping[str, Any]) -> bytes:
    if not isinstance(schema, Mapping):
        raise DefinitionError(name, "input schema must be a JSON object")
    plain = copy.deepcopy(dict(schema))
    try:
        check_json(plain, max_depth=MAX_SCHEMA_DEPTH)
    except PayloadError as exc:
        raise DefinitionError(name, f"input schema is not plain JSON: {exc.message}") from None
    raw = canonical_bytes(plain)
    if len(raw) > MAX_SCHEMA_BYTES:
        raise DefinitionError(name, f"input schema larger than {MAX_SCHEMA_BYTES} bytes")
    try:
        Draft202012Validator.check_schema(plain)
    except SchemaError as exc:
        raise DefinitionError(
            name, f"input schema is not a valid JSON Schema 2020-12: {exc.message}"
        ) from None
    if plain.get("type") != "object":
        raise DefinitionError(name, 'input schema must describe an object ("type": "object")')
    return raw


def _normalise_capabilities(name: str, capabilities: Iterable[str]) -> tuple[str, ...]:
    if isinstance(capabilities, str):
        raise DefinitionError(name, "capabilities must be a collection of tags, not a string")
    tags: set[str] = set()
    for raw in capabilities:
        if not isinstance(raw, str):
            raise DefinitionError(name, f"capability {raw!r} is not a string")
        tag = raw.strip().lower()
        if not CAPABILITY_TAG.fullmatch(tag):
            raise DefinitionError(name, f"capability {raw!r} is not a dotted lowercase tag")
        tags.add(tag)
    return tuple(sorted(tags))


def _check_contradictions(
    name: str, effect: Effect, replay_safety: ReplaySafety, tags: tuple[str, ...]
) -> None:
    if effect is Effect.READ_ONLY:
        if replay_safety is not ReplaySafety.SAFE:
            raise DefinitionError(name, "a read_only tool must have replay_safety 'safe'")
        forbidden = sorted(WRITE_CAPABILITIES.intersection(tags))
        if forbidden:
            raise DefinitionError(
                name, f"a read_only tool may not hold write capabilities {forbidden}"
            )
    elif replay_safety is ReplaySafety.SAFE:
        raise DefinitionError(
            name,
            "replay_safety 'safe' is for read_only tools; a mutating tool is "
            "'idempotent' or 'unsafe'",
        )

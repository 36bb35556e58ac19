"""The Cedar schema ARVIS ships (``arvis policy schema`` prints it), and the payload's part of it.

The entities and the action are fixed: ``Arvis::Principal`` (a member of its
``Arvis::Tenant``), ``Arvis::Tool`` and ``Arvis::Action::"tool.execute"``. The
context's ``payload`` is a record whose attributes come from the plan's input
schemas: a top-level (or nested) property whose JSON Schema type maps onto a
Cedar type, typed alike by every tool that declares it, is an optional
attribute; anything else is not given to Cedar at all, so no policy can test it
(validation refuses a policy that tries). The conversion of a payload follows
the same declared types exactly (:func:`to_cedar`): a value that does not fit
its type is an error the caller turns into a refusal, never a value Cedar would
evaluate as something else.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from arvis.domain.definitions import ToolDefinition

SCALARS = ("String", "Long", "Bool", "decimal")
_JSON_SCALARS = {"string": "String", "integer": "Long", "boolean": "Bool", "number": "decimal"}
# Nested records deeper than this are not declared: a policy rarely reads so far,
# and the schema (and every conversion) stays small.
MAX_DEPTH = 3
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
# Cedar's decimal: four fractional digits, an i64 of ten-thousandths.
_DECIMAL_LIMIT = Decimal("922337203685477.5807")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SetOf:
    element: CedarType


@dataclass(frozen=True)
class Record:
    attributes: tuple[tuple[str, CedarType], ...]
    """Sorted by name; every attribute is optional."""

    def get(self, name: str) -> CedarType | None:
        for attribute, kind in self.attributes:
            if attribute == name:
                return kind
        return None


CedarType = str | SetOf | Record
"""A scalar name of :data:`SCALARS`, a set, or a record."""

EMPTY = Record(())
ACTOR = Record((("auth_method", "String"), ("id", "String"), ("key_id", "String")))
"""``context.actor``: the agent acting for the principal."""


class ConversionError(ValueError):
    """A payload value that does not fit the type the schema declares for it."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"payload field {path} is not {expected} as the policy schema declares")
        self.path = path
        self.expected = expected


def _json_type(node: Any, depth: int) -> CedarType | None:
    if not isinstance(node, Mapping):
        return None
    kind = node.get("type")
    if isinstance(kind, str) and kind in _JSON_SCALARS:
        return _JSON_SCALARS[kind]
    if kind == "array":
        element = _json_type(node.get("items"), depth)
        return SetOf(element) if isinstance(element, str) else None
    if kind == "object" and depth < MAX_DEPTH:
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            return _record(properties.items(), depth + 1)
    return None


def _record(properties: Iterable[tuple[Any, Any]], depth: int) -> Record:
    # A member named like Cedar's JSON escapes (``__extn``, ``__entity``) would make
    # Cedar read the record holding it as an extension value or an entity reference.
    found = {
        name: kind
        for name, node in properties
        if isinstance(name, str)
        and not name.startswith("__")
        and (kind := _json_type(node, depth)) is not None
    }
    return Record(tuple(sorted(found.items())))


def _merge(a: CedarType, b: CedarType) -> CedarType | None:
    """One type for a property two tools declare, or None when they disagree."""
    if isinstance(a, Record) and isinstance(b, Record):
        return merge_records([a, b])
    return a if a == b else None


def merge_records(records: Iterable[Record]) -> Record:
    """The attributes every record that declares them types alike."""
    merged: dict[str, CedarType] = {}
    conflicted: set[str] = set()
    for record in records:
        for name, kind in record.attributes:
            if name in conflicted:
                continue
            if name not in merged:
                merged[name] = kind
                continue
            joined = _merge(merged[name], kind)
            if joined is None:
                del merged[name]
                conflicted.add(name)
            else:
                merged[name] = joined
    return Record(tuple(sorted(merged.items())))


def payload_type(definitions: Iterable[ToolDefinition]) -> Record:
    """The context's ``payload`` record for a plan's tools."""
    records = []
    for definition in definitions:
        properties = definition.input_schema.get("properties")
        if definition.input_schema.get("type") == "object" and isinstance(properties, Mapping):
            records.append(_record(properties.items(), 1))
    return merge_records(records)


def render_type(kind: CedarType, indent: str = "    ") -> str:
    if isinstance(kind, str):
        return kind
    if isinstance(kind, SetOf):
        return f"Set<{render_type(kind.element, indent)}>"
    if not kind.attributes:
        return "{}"
    inner = indent + "  "
    lines = [f"{inner}{json.dumps(name)}?: {render_type(t, inner)}," for name, t in kind.attributes]
    return "{\n" + "\n".join(lines) + f"\n{indent}}}"


SCHEMA_TEMPLATE = """\
// The Cedar schema of ARVIS (docs/policy.md). Printed by `arvis policy schema`; the
// Payload type is derived from the deployment's tool plan.
namespace Arvis {
  // A tenant. Every principal is a member of its tenant:
  //   permit (principal in Arvis::Tenant::"acme", ...)
  entity Tenant;

  // Who asks: the authenticated principal (its id is the principal id, which is
  // unique only within a tenant: scope policies by tenant).
  // A person an agent acts for is the principal; the agent is context.actor.
  entity Principal in [Tenant] = {
    tenant: String,
    roles: Set<String>,         // "agent", "approver", "auditor", "admin"
    auth_method: String,        // "api_key", "oidc" (a JWT), "development", "anonymous", "slack"
    key_id?: String,            // the API key's public id
    issuer?: String,            // the OpenID Connect issuer of a JWT principal
  };

  // The agent acting for the principal (RFC 8693 act, or an agent's key presenting the
  // person's token): forbid by it with  context has actor && context.actor.id == "…"
  type Actor = {
    id: String,
    auth_method: String,        // how the agent authenticated: "api_key" or "oidc"
    key_id?: String,            // the agent's API key id, when it used one
  };

  // What would run: a tool of the run's plan (its id is the tool name).
  entity Tool = {
    name: String,
    effect: String,             // "read_only" | "mutating"
    replay_safety: String,      // "safe" | "idempotent" | "unsafe"
    capabilities: Set<String>,  // e.g. "network.access", "filesystem.write"
    plan_id: String,
    fingerprint: String,
  };

  // The frozen payload's fields that the plan's tools declare alike (optional all).
  type Payload = {payload};

  action "tool.execute" appliesTo {
    principal: [Principal],
    resource: [Tool],
    context: {
      run_id: String,
      causal_id: String,
      attempt: Long,            // the attempt number this call would take
      payload_digest: String,
      payload: Payload,
      egress_host?: String,     // the host a network tool would reach, normalised
      time: datetime,           // when admission decides (UTC)
      actor?: Actor,            // set only when an agent acts for the principal
    },
  };
}
"""


def context_type(payload: Record) -> Record:
    """The action's context as a record (what ``has`` tests are checked against)."""
    return Record(
        (
            ("actor", ACTOR),
            ("attempt", "Long"),
            ("causal_id", "String"),
            ("egress_host", "String"),
            ("payload", payload),
            ("payload_digest", "String"),
            ("run_id", "String"),
            ("time", "datetime"),
        )
    )


def render_schema(payload: Record) -> str:
    """The schema text for a plan whose payload record is ``payload``."""
    return SCHEMA_TEMPLATE.replace("{payload}", render_type(payload, "  "))


def attribute_path(path: str, name: str) -> str:
    return f"{path}.{name}" if _IDENTIFIER.match(name) else f"{path}[{json.dumps(name)}]"


def to_cedar(value: Any, kind: CedarType, path: str) -> Any:
    """``value`` as Cedar's JSON form of ``kind``; :class:`ConversionError` when it is not one."""
    if kind == "String":
        if isinstance(value, str):
            return value
        raise ConversionError(path, "a string")
    if kind == "Bool":
        if isinstance(value, bool):
            return value
        raise ConversionError(path, "a boolean")
    if kind == "Long":
        if type(value) is int and LONG_MIN <= value <= LONG_MAX:
            return value
        raise ConversionError(path, "an integer in Cedar's 64-bit range")
    if kind == "decimal":
        return {"__extn": {"fn": "decimal", "arg": decimal_text(value, path)}}
    if isinstance(kind, SetOf):
        if not isinstance(value, list):
            raise ConversionError(path, "an array")
        return [to_cedar(item, kind.element, f"{path}[{i}]") for i, item in enumerate(value)]
    assert isinstance(kind, Record)
    if not isinstance(value, dict):
        raise ConversionError(path, "an object")
    return record_to_cedar(value, kind, path)


def record_to_cedar(value: Mapping[str, Any], record: Record, path: str) -> dict[str, Any]:
    """The declared attributes of ``value``; undeclared members are not given to Cedar."""
    converted: dict[str, Any] = {}
    for name, kind in record.attributes:
        if name in value:
            converted[name] = to_cedar(value[name], kind, attribute_path(path, name))
    return converted


def decimal_text(value: Any, path: str) -> str:
    """A JSON number as Cedar decimal text (``12.5``, ``-3.0``): at most four
    fractional digits, within Cedar's range; anything else is not a decimal."""
    if type(value) not in (int, float) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConversionError(path, "a number")
    try:
        exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        fixed = exact.quantize(Decimal("0.0001"))
    except InvalidOperation:
        raise ConversionError(path, "a decimal Cedar can hold") from None
    if fixed != exact or abs(fixed) > _DECIMAL_LIMIT:
        raise ConversionError(path, "a decimal with at most four fractional digits")
    text = format(fixed.normalize(), "f")
    return text if "." in text else f"{text}.0"

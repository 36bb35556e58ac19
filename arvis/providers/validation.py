"""Vendor-neutral rules for what a model may hand back, and how tools are described.

Every provider (the fake one included) turns a raw call into a decision through
:class:`CallValidator`, so a test fake fails closed exactly like the real adapter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsonschema_rs

from arvis.domain.canonical import check_json
from arvis.domain.decisions import ActionDecision
from arvis.domain.definitions import MAX_SCHEMA_DEPTH, ToolDefinition
from arvis.domain.errors import PayloadError
from arvis.domain.schemas import compile_schema
from arvis.providers.base import FinalizedDecision, ModelRequest
from arvis.providers.errors import (
    ProviderArgumentsInvalid,
    ProviderArgumentsSchemaViolation,
    ProviderDuplicateCallId,
    ProviderLimitExceeded,
    ProviderProtocolViolation,
    ProviderUnknownTool,
)

# A call id becomes a causal id downstream: visible ASCII only, bounded.
CALL_ID = re.compile(r"^[\x21-\x7e]{1,256}$")
_MAX_MESSAGE_CHARS = 200


def clip(text: object) -> str:
    """Provider-supplied text, shortened before it goes into an error message."""
    return str(text)[:_MAX_MESSAGE_CHARS]


# Keywords OpenAI's strict mode understands; a schema using anything else is sent
# with strict false, and ARVIS validates the arguments itself either way.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "description", "title", "$defs", "$ref", "pattern", "format", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
_SCHEMA_MAPS = ("properties", "$defs")
_SCHEMA_LISTS = ("anyOf",)


def strict_eligible(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` qualifies for OpenAI strict mode.

    Every object lists all its properties as required and forbids additional
    ones, recursively, and only keywords strict mode supports appear.
    """
    if "anyOf" in schema:
        return False  # the root of a strict schema must be a plain object
    return _strict_node(schema)


def _strict_node(node: object) -> bool:
    if not isinstance(node, Mapping):
        return False
    if not set(node).issubset(_STRICT_KEYWORDS):
        return False
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object or "properties" in node:
        properties = node.get("properties", {})
        if not isinstance(properties, Mapping):
            return False
        if node.get("additionalProperties") is not False:
            return False
        required = node.get("required", [])
        if not isinstance(required, list) or set(required) != set(properties):
            return False
    elif "additionalProperties" in node and node["additionalProperties"] is not False:
        return False
    for key in _SCHEMA_MAPS:
        children = node.get(key, {})
        if not isinstance(children, Mapping) or not all(
            _strict_node(child) for child in children.values()
        ):
            return False
    for key in _SCHEMA_LISTS:
        options = node.get(key, [])
        if not isinstance(options, list) or not all(_strict_node(child) for child in options):
            return False
    items = node.get("items")
    return items is None or _strict_node(items)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Two parsers may keep different copies of a repeated key; refuse the ambiguity.
            raise ValueError(f"repeated key {key!r}")
        result[key] = value
    return result


def parse_arguments(raw: str, *, tool: str, call_id: str) -> dict[str, Any]:
    """Parse a call's arguments string into a plain JSON object, or fail closed."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        raise ProviderArgumentsInvalid(
            f"call {call_id!r} to {tool!r}: arguments are not valid JSON ({exc})",
            tool=tool,
            call_id=call_id,
        ) from None
    if not isinstance(value, dict):
        raise ProviderArgumentsInvalid(
            f"call {call_id!r} to {tool!r}: arguments are a JSON {type(value).__name__}, "
            "not an object",
            tool=tool,
            call_id=call_id,
        )
    try:
        check_json(value, max_depth=MAX_SCHEMA_DEPTH)
    except PayloadError as exc:
        raise ProviderArgumentsInvalid(
            f"call {call_id!r} to {tool!r}: {exc.message}", tool=tool, call_id=call_id
        ) from None
    return value


class CallValidator:
    """Turns the raw calls of one response into finalized decisions, or fails closed."""

    def __init__(self, request: ModelRequest) -> None:
        self._request = request
        self._validators: dict[str, jsonschema_rs.Validator] = {}
        self._seen_call_ids: set[str] = set()

    def known_tool(self, name: str, *, call_id: str) -> ToolDefinition:
        """The offered definition called ``name``; an unknown name or odd call id fails closed."""
        if not CALL_ID.fullmatch(call_id):
            raise ProviderProtocolViolation(
                f"call id {clip(call_id)!r} is not 1-256 visible ASCII characters", tool=clip(name)
            )
        definition = self._request.tool(name)
        if definition is None:
            raise ProviderUnknownTool(
                f"call {call_id!r} names tool {clip(name)!r}, which the request did not offer",
                tool=clip(name),
                call_id=call_id,
            )
        return definition

    def finalize(self, *, name: str, call_id: str, arguments: str) -> FinalizedDecision:
        """Validate one completed call; each call id may be finalized once."""
        definition = self.known_tool(name, call_id=call_id)
        if call_id in self._seen_call_ids:
            raise ProviderDuplicateCallId(
                f"call id {call_id!r} appears twice in one response", tool=name, call_id=call_id
            )
        self._seen_call_ids.add(call_id)
        limit = self._request.limits.max_argument_bytes
        if len(arguments.encode("utf-8")) > limit:
            raise ProviderLimitExceeded(
                f"call {call_id!r}: arguments larger than {limit} bytes",
                tool=name,
                call_id=call_id,
                limit="max_argument_bytes",
            )
        payload = parse_arguments(arguments, tool=name, call_id=call_id)
        validator = self._validator(definition)
        if validator is None:
            raise ProviderArgumentsSchemaViolation(
                f"call {call_id!r} to {name!r}: the input schema cannot be checked in bounded time",
                tool=name,
                call_id=call_id,
            )
        error = next(validator.iter_errors(payload), None)
        if error is not None:
            where = "$" + "".join(f"[{part!r}]" for part in error.instance_path)
            raise ProviderArgumentsSchemaViolation(
                f"call {call_id!r} to {name!r}: arguments at {where} violate the input schema "
                f"({error.kind.name} rule)",
                tool=name,
                call_id=call_id,
            )
        return FinalizedDecision(
            call_id=call_id, decision=ActionDecision(tool=name, payload=payload)
        )

    def _validator(self, definition: ToolDefinition) -> jsonschema_rs.Validator | None:
        # In bounded time, like admission's (DESIGN §10): arvis.domain.schemas.
        validator = self._validators.get(definition.name)
        if validator is None:
            try:
                validator = compile_schema(definition.input_schema)
            except ValueError:
                return None  # refused at plan build; a plan persisted before fails closed
            self._validators[definition.name] = validator
        return validator

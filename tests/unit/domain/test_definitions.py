"""Tool definitions: validation, normalisation, fingerprints (DESIGN §1, §3)."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import DefinitionError


def make(**overrides: Any) -> ToolDefinition:
    fields: dict[str, Any] = {
        "name": "demo.tool",
        "description": "A tool.",
        "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
        "effect": "mutating",
        "replay_safety": "idempotent",
        "capabilities": [],
    }
    fields.update(overrides)
    return ToolDefinition(**fields)


def test_capabilities_are_normalised_to_a_sorted_set_of_lowercase_tags() -> None:
    definition = make(capabilities=["Network.Access", " filesystem.write", "network.access"])
    assert definition.capabilities == ("filesystem.write", "network.access")


def test_the_fingerprint_is_stable_across_capability_order_and_schema_key_order() -> None:
    a = make(
        capabilities=["network.access", "filesystem.write"],
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
    )
    b = make(
        capabilities=["filesystem.write", "network.access"],
        input_schema={"properties": {"x": {"type": "string"}}, "type": "object"},
    )
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint == make(capabilities=["network.access", "filesystem.write"]).fingerprint


def test_any_change_of_a_definition_changes_its_fingerprint() -> None:
    base = make().fingerprint
    assert make(description="Another.").fingerprint != base
    assert make(replay_safety="unsafe").fingerprint != base
    assert make(capabilities=["network.access"]).fingerprint != base


@pytest.mark.parametrize(
    ("overrides", "rule"),
    [
        ({"effect": "read_only", "replay_safety": "idempotent"}, "must have replay_safety 'safe'"),
        (
            {"effect": "read_only", "replay_safety": "safe", "capabilities": ["process.execute"]},
            "may not hold write capabilities",
        ),
        ({"effect": "mutating", "replay_safety": "safe"}, "is for read_only tools"),
        ({"name": "Bad Name"}, "name must match"),
        ({"capabilities": ["NoDots"]}, "dotted lowercase tag"),
        ({"input_schema": {"type": "array"}}, "must describe an object"),
        ({"input_schema": {"type": "object", "minProperties": -1}}, "JSON Schema 2020-12"),
        ({"description": ""}, "non-empty"),
        ({"effect": "explosive"}, "effect must be one of"),
    ],
)
def test_a_contradiction_fails_construction_naming_the_tool_and_the_rule(
    overrides: dict[str, Any], rule: str
) -> None:
    with pytest.raises(DefinitionError, match=rule) as caught:
        make(**overrides)
    assert caught.value.tool == overrides.get("name", "demo.tool")


def test_a_definition_is_immutable_and_its_schema_is_a_copy() -> None:
    definition = make()
    with pytest.raises(AttributeError):
        definition.name = "other"  # type: ignore[misc]
    definition.input_schema["type"] = "array"
    assert definition.input_schema["type"] == "object"


def test_a_definition_round_trips_and_a_stored_fingerprint_is_checked() -> None:
    definition = make()
    assert ToolDefinition.from_dict(definition.to_dict()) == definition
    with pytest.raises(DefinitionError, match="fingerprint"):
        ToolDefinition.from_dict({**definition.to_dict(), "fingerprint": "0" * 64})

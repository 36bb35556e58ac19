"""Strict-mode eligibility of a schema, and call ids that could not be causal ids."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arvis.providers import errors as e
from arvis.providers.validation import strict_eligible
from tests.unit.providers.sse import fails_with, one_call

STRICT_NESTED = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "cc": {"type": ["array", "null"], "items": {"type": "string"}},
        "meta": {
            "type": "object",
            "properties": {"priority": {"enum": ["low", "high"]}},
            "required": ["priority"],
            "additionalProperties": False,
        },
    },
    "required": ["to", "cc", "meta"],
    "additionalProperties": False,
}


def with_change(path: list[str], key: str, value: Any) -> dict[str, Any]:
    schema = copy.deepcopy(STRICT_NESTED)
    node = schema
    for part in path:
        node = node[part]
    if value is None:
        del node[key]
    else:
        node[key] = value
    return schema


def test_a_fully_closed_schema_with_every_property_required_is_strict() -> None:
    assert strict_eligible(STRICT_NESTED)


@pytest.mark.parametrize(
    "schema",
    [
        with_change([], "required", ["to", "meta"]),
        with_change([], "additionalProperties", None),
        with_change(["properties", "meta"], "additionalProperties", True),
        with_change(["properties", "meta"], "required", []),
        with_change(["properties", "to"], "maxLength", 10),
        with_change([], "patternProperties", {"^x": {"type": "string"}}),
    ],
    ids=["optional", "open-root", "open-nested", "optional-nested", "unsupported", "pattern-props"],
)
def test_a_schema_strict_mode_cannot_honour_is_sent_with_strict_false(
    schema: dict[str, Any],
) -> None:
    assert not strict_eligible(schema)


@pytest.mark.parametrize("call_id", ["", "call a", "call\n1", "ca\u200bll", "c" * 257])
async def test_a_call_id_that_cannot_be_a_causal_id_fails_closed(call_id: str) -> None:
    await fails_with(one_call(call_id=call_id), e.ProviderProtocolViolation)

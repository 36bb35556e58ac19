"""The OpenAI Agents SDK's side of rendering: which schemas it may send in strict mode.
What the model is told, and under which names, is :mod:`arvis.integrations.outputs`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from agents.strict_schema import ensure_strict_json_schema

from arvis.integrations.outputs import (
    DO_NOT_RETRY,
    causal_id_for_call,
    invalid_arguments,
    model_name,
    model_output,
)

__all__ = [
    "DO_NOT_RETRY",
    "causal_id_for_call",
    "invalid_arguments",
    "model_name",
    "model_output",
    "strict_eligible",
]

# Keywords OpenAI's strict mode understands; any other one is sent with strict off (ARVIS
# checks the arguments against the full schema either way).
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "description", "title", "$defs", "$ref", "pattern", "format", "minimum",
        "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip


def strict_eligible(schema: Mapping[str, Any]) -> bool:
    """Whether the SDK may send ``schema`` in strict mode without changing its meaning:
    its strict normalisation leaves it as it is, and it uses only strict keywords."""
    try:
        normalised = ensure_strict_json_schema(copy.deepcopy(dict(schema)))
    except Exception:  # the SDK refuses the schema in strict mode, for whatever reason
        return False
    return normalised == schema and _keywords_allowed(schema)


def _keywords_allowed(node: object) -> bool:
    if isinstance(node, list):
        return all(_keywords_allowed(child) for child in node)
    if not isinstance(node, Mapping):
        return True
    if not set(node).issubset(_STRICT_KEYWORDS):
        return False
    children: list[object] = []
    for key in ("properties", "$defs"):
        value = node.get(key)
        if isinstance(value, Mapping):
            children.extend(value.values())
    children.extend(node[key] for key in ("items", "anyOf") if key in node)
    return all(_keywords_allowed(child) for child in children)

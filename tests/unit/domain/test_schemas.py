"""Payloads against input schemas in bounded time (DESIGN §10, arvis.domain.schemas)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import DefinitionError
from arvis.domain.schemas import MAX_PROBLEM_CHARS, PayloadValidator, unsupported
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.policy.policy import RulePolicy
from arvis.tools import ToolHost, build_tool_set

BACKTRACKING = "^(a+)+$"


def tool(properties: dict[str, Any], **schema: Any) -> ToolDefinition:
    return ToolDefinition(
        name="notes.add",
        description="Add a note.",
        input_schema={"type": "object", "properties": properties, **schema},
        effect="mutating",
        replay_safety="unsafe",
    )


def test_a_catastrophic_pattern_answers_at_once_on_a_hostile_payload() -> None:
    # Python's re needs about 2**n steps here: n = 29 took 18 s, n = 5000 never ends.
    definition = tool({"text": {"type": "string", "pattern": BACKTRACKING}})
    service = ToolAuthorizationService(RulePolicy(), SystemClock())
    for hostile in ("a" * 29 + "!", "a" * 5000 + "!"):
        problem = service.schema_problem(definition, {"text": hostile})
        assert problem is not None
        assert problem.startswith("payload does not match the input schema at text: ")
        assert "does not match" in problem
    assert service.schema_problem(definition, {"text": "a" * 5000}) is None


def test_pattern_properties_run_on_the_same_linear_engine() -> None:
    definition = tool({}, patternProperties={BACKTRACKING: {"type": "integer"}})
    problem = PayloadValidator().problem(definition, {"a" * 5000: "x", "a" * 5000 + "!": "y"})
    assert problem is not None
    assert "is not of type" in problem


def test_a_problem_names_the_path_and_is_cut_to_a_bounded_length() -> None:
    definition = tool({"items": {"type": "array", "items": {"type": "string", "maxLength": 3}}})
    problem = PayloadValidator().problem(definition, {"items": ["ok", "x" * 10_000]})
    assert problem is not None
    assert problem.startswith("payload does not match the input schema at items/1: ")
    assert len(problem) < MAX_PROBLEM_CHARS + 80
    assert "\n" not in problem


def test_format_is_an_annotation_nothing_in_a_payload_is_parsed_or_compiled() -> None:
    definition = tool({"when": {"type": "string", "format": "date"}, "re": {"format": "regex"}})
    assert PayloadValidator().problem(definition, {"when": "not a date", "re": "(a+)+("}) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"t": {"type": "string", "pattern": "(?=a)a"}}},  # lookahead
        {"properties": {"t": {"type": "string", "pattern": "(a)\\1"}}},  # backreference
        {"patternProperties": {"(?<!b)a": {}}},  # lookbehind
        {"properties": {"t": {"$ref": "https://schemas.example/t.json"}}},  # never fetched
    ],
)
def test_a_schema_only_a_backtracking_engine_or_a_fetch_could_check_is_refused_at_plan_build(
    schema: dict[str, Any], tmp_path: Path
) -> None:
    entry = {
        "name": "crm.update",
        "description": "Update a CRM record.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "idempotent",
        "input_schema": {"type": "object", **schema},
    }
    host = ToolHost(sandbox_dir=tmp_path, http=httpx.AsyncClient())
    with pytest.raises(DefinitionError) as caught:
        build_tool_set({"http": [entry]}, host)
    assert caught.value.tool == "crm.update"
    assert "cannot be checked in bounded time" in str(caught.value)
    assert "[[tools.http]] #1" in str(caught.value)


def test_an_unsupported_schema_that_reaches_admission_anyway_is_refused_not_run() -> None:
    # A plan persisted before the rule: admission refuses every payload, it never hangs.
    definition = tool({"t": {"type": "string", "pattern": "(?=a)a"}})
    assert unsupported(definition) is not None
    problem = PayloadValidator().problem(definition, {"t": "a"})
    assert problem is not None
    assert "cannot be checked in bounded time" in problem

"""A payload against its tool's input schema, in bounded time (DESIGN §10).

Admission checks every payload against its tool's schema on the event loop, and
a schema may come from a server ARVIS does not control (an upstream MCP
server's tool list). Python's ``re`` backtracks: ``"pattern": "^(a+)+$"`` and 29
characters held one worker's loop for 18 s. So schemas are compiled by
``jsonschema-rs`` with its ``regex``-crate engine, whose matching time is linear
in the input, for ``pattern`` and ``patternProperties`` alike:

- a pattern only a backtracking engine can run (lookaround, backreferences) or
  one too large for the engine's size limits cannot be compiled, so a schema
  holding one is refused when the tool plan is built, naming the tool
  (:func:`unsupported`) — never at call time;
- ``$ref`` resolves inside the schema only: nothing is fetched;
- ``format`` is an annotation, as JSON Schema 2020-12 makes it by default: no
  payload string is ever compiled as a regex or parsed as a date.

The first problem is reported as its instance path and the validator's message,
cut to :data:`MAX_PROBLEM_CHARS` (the message may quote the payload).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema_rs

from arvis.domain.definitions import ToolDefinition

MAX_PROBLEM_CHARS = 300
"""The longest schema message a refusal quotes."""


def compile_schema(schema: Mapping[str, Any]) -> jsonschema_rs.Validator:
    """The bounded-time validator of ``schema``; ValueError when it cannot be built."""
    try:
        return jsonschema_rs.Draft202012Validator(
            dict(schema),
            validate_formats=False,
            pattern_options=jsonschema_rs.RegexOptions(),
            offline=True,
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError) as exc:
        raise ValueError(_first_line(str(exc))) from None


def unsupported(definition: ToolDefinition) -> str | None:
    """Why ``definition``'s schema cannot be checked in bounded time, or None."""
    try:
        compile_schema(definition.input_schema)
    except ValueError as exc:
        return (
            "input schema cannot be checked in bounded time (a pattern that needs "
            f"backtracking, lookaround or a backreference, or a $ref outside it): {exc}"
        )
    return None


class PayloadValidator:
    """Every definition's compiled validator, by fingerprint; the first problem of a payload."""

    def __init__(self) -> None:
        # Definitions are immutable and fingerprinted: compile each schema once.
        self._validators: dict[str, jsonschema_rs.Validator | str] = {}

    def problem(self, definition: ToolDefinition, value: Any) -> str | None:
        """None when ``value`` matches the schema, else one line saying where and why."""
        validator = self._validators.get(definition.fingerprint)
        if validator is None:
            try:
                validator = compile_schema(definition.input_schema)
            except ValueError as exc:
                # Refused at plan build; a plan persisted before that rule still fails closed.
                validator = f"the input schema cannot be checked in bounded time: {exc}"
            self._validators[definition.fingerprint] = validator
        if isinstance(validator, str):
            return validator[: MAX_PROBLEM_CHARS + 60]
        error = next(validator.iter_errors(value), None)
        if error is None:
            return None
        where = ("/".join(str(part) for part in error.instance_path) or "(root)")[:200]
        message = _first_line(error.message)[:MAX_PROBLEM_CHARS]
        return f"payload does not match the input schema at {where}: {message}"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "invalid"

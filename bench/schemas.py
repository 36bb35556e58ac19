"""Figure 12: checking a payload against its input schema, before and after issue 23.

``python -m bench.schemas`` (no database). Admission checks every payload on the
event loop. Before issue 23 it used Python's ``jsonschema`` (``re`` for
``pattern``, which backtracks); now ``arvis.domain.schemas`` (``jsonschema-rs`` on
the ``regex`` crate, linear in the input). Side by side, in alternating blocks,
the time of one check (the first problem, or none) for:

- the built-in ``files.write`` schema and a valid payload (the hot path);
- an upstream-sized schema (eight typed properties, an enum, a pattern, an array
  of objects) and a valid payload;
- ``"pattern": "^(a+)+$"`` against ``"a" * n + "!"``: the old engine's time doubles
  with each character (it is measured only for small n), the new one's is linear.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from jsonschema import Draft202012Validator

from arvis.domain.definitions import ToolDefinition
from arvis.domain.schemas import PayloadValidator
from arvis.tools.builtins import FILES_WRITE

Check = Callable[[], object]

UPSTREAM = ToolDefinition(
    name="crm.update",
    description="Update a CRM record.",
    input_schema={
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "maxLength": 200},
            "email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"},
            "stage": {"enum": ["lead", "qualified", "won", "lost"]},
            "amount": {"type": "number", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            "owner": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "team": {"type": "string"}},
                "required": ["id"],
            },
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                    "required": ["sku", "qty"],
                },
            },
        },
        "required": ["id", "name", "stage"],
        "additionalProperties": False,
    },
    effect="mutating",
    replay_safety="idempotent",
)
UPSTREAM_PAYLOAD = {
    "id": 42,
    "name": "Acme Corp",
    "email": "buyer@acme.example",
    "stage": "qualified",
    "amount": 1250.5,
    "tags": ["eu", "priority"],
    "owner": {"id": 7, "team": "north"},
    "lines": [{"sku": f"sku-{i}", "qty": i} for i in range(1, 6)],
}


def _redos(n: int) -> tuple[ToolDefinition, dict[str, Any]]:
    definition = ToolDefinition(
        name="notes.add",
        description="Add a note.",
        input_schema={"type": "object", "properties": {"text": {"pattern": "^(a+)+$"}}},
        effect="mutating",
        replay_safety="unsafe",
    )
    return definition, {"text": "a" * n + "!"}


def _old(definition: ToolDefinition, payload: Any) -> Check:
    validator = Draft202012Validator(definition.input_schema)
    return lambda: next(iter(validator.iter_errors(payload)), None)


def _new(definition: ToolDefinition, payload: Any) -> Check:
    validator = PayloadValidator()
    return lambda: validator.problem(definition, payload)


def _per_call_us(check: Check, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        check()
    return (time.perf_counter() - started) / calls * 1e6


def side_by_side(old: Check, new: Check, calls: int, rounds: int = 5) -> tuple[float, float]:
    """Median µs per check of each, from alternating blocks."""
    old(), new()  # warm: compile, caches
    olds, news = [], []
    for _ in range(rounds):
        olds.append(_per_call_us(old, calls))
        news.append(_per_call_us(new, calls))
    return statistics.median(olds), statistics.median(news)


def main() -> None:
    rows: list[tuple[str, str, str, str]] = []
    valid = {"path": "notes/today.txt", "content": "buy milk"}
    for label, definition, payload in (
        ("files.write, valid payload", FILES_WRITE, valid),
        ("upstream-sized schema, valid payload", UPSTREAM, UPSTREAM_PAYLOAD),
    ):
        old, new = side_by_side(_old(definition, payload), _new(definition, payload), 2000)
        rows.append((label, f"{old:.1f} µs", f"{new:.1f} µs", f"{old / new:.1f} x"))
    for n in (16, 18, 20, 22, 5000):
        definition, payload = _redos(n)
        new_check = _new(definition, payload)
        new_check()
        new = statistics.median(_per_call_us(new_check, 1000) for _ in range(3))
        if n > 30:
            rows.append((f"^(a+)+$, n = {n}", "never ends (~2^n steps)", f"{new:.1f} µs", ""))
            continue
        old_check = _old(definition, payload)
        old = statistics.median(_per_call_us(old_check, 1) for _ in range(3))
        rows.append((f"^(a+)+$, n = {n}", f"{old / 1000:.1f} ms", f"{new:.1f} µs", ""))
    print("| check | before (jsonschema, re) | now (jsonschema-rs, regex) | before / now |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

"""Just enough TOML writing for the suite's ``arvis.toml`` files: inline values."""

from __future__ import annotations

import json
from typing import Any


def value(item: Any) -> str:
    """``item`` as a TOML inline value (strings, numbers, booleans, lists, tables)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return json.dumps(item)  # JSON's escapes are TOML basic-string escapes
    if isinstance(item, list | tuple):
        return "[" + ", ".join(value(element) for element in item) + "]"
    if isinstance(item, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {value(v)}" for k, v in item.items()) + " }"
    raise TypeError(f"no TOML for {item!r}")


def table(header: str, fields: dict[str, Any]) -> str:
    """``[header]`` (or ``[[header]]`` when written so) with one line per field."""
    lines = [header, *(f"{key} = {value(item)}" for key, item in fields.items())]
    return "\n".join(lines) + "\n"

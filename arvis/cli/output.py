"""How the ``arvis`` command prints: readable tables by default, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typer

from arvis.client import SyscallAnswer
from arvis.lifecycle.results import SyscallResult


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    *,
    empty: str,
    uncut: Sequence[str] = (),
) -> None:
    """A plain aligned table of ``columns``; long cells are cut with an ellipsis, except
    in the ``uncut`` columns (who made a call: its end says for whom)."""
    if not rows:
        typer.echo(empty)
        return
    cells = [
        [_cell(row.get(column), None if column in uncut else 48) for column in columns]
        for row in rows
    ]
    widths = [
        max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)
    ]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)))
    for line in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())


def _cell(value: Any, limit: int | None = 48) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value) or "-"
    elif isinstance(value, dict):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = str(value)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def outcome_table(results: Sequence[SyscallResult | SyscallAnswer]) -> None:
    rows = [
        {
            "causal_id": r.causal_id,
            "outcome": r.outcome,
            "boundary": r.boundary.value if r.boundary is not None else None,
            "reason": r.reason,
            "result": r.result if r.problem is None else r.problem,
            "position": r.journal_position,
        }
        for r in results
    ]
    columns = ["causal_id", "outcome", "boundary", "reason", "result", "position"]
    table(rows, columns, empty="no results")

"""The store's copy of the domain's boundary sets, generated from them.

``store/sql/arvis_boundaries.sql`` is this module's output: the triggers and checks
of the store ask ``arvis_uncertain`` and ``arvis_resolved`` rather than restate
which boundaries are uncertain or resolved, and a test keeps the file equal to what
:func:`boundaries_sql` writes from :mod:`arvis.domain.boundary` (regenerate with
``python -m arvis.store.boundaries``; a change is a new revision's frozen text).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from arvis.domain.boundary import RESOLVED_BOUNDARIES, UNCERTAIN_BOUNDARIES, EffectBoundary

SQL_FILE = Path(__file__).resolve().parent / "sql" / "arvis_boundaries.sql"


def _function(name: str, members: Iterable[EffectBoundary], says: str) -> str:
    values = ", ".join(f"'{member.value}'" for member in members)
    return (
        f"-- {says}\n"
        f"CREATE OR REPLACE FUNCTION {name}(p_boundary text) RETURNS boolean\n"
        "LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$\n"
        f"    SELECT p_boundary IN ({values})\n"
        "$$;\n"
    )


def boundaries_sql() -> str:
    return (
        "-- Generated from arvis/domain/boundary.py by arvis/store/boundaries.py: do not\n"
        "-- edit by hand (a test compares the two).\n"
        + _function(
            "arvis_uncertain",
            UNCERTAIN_BOUNDARIES,
            "Nobody can say whether the effect happened: open for resolution.",
        )
        + "\n"
        + _function(
            "arvis_resolved",
            RESOLVED_BOUNDARIES,
            "What a resolution may say an uncertain attempt did.",
        )
    )


if __name__ == "__main__":
    SQL_FILE.write_text(boundaries_sql())

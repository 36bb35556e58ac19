"""The filters of a list of runs, read from a query string the same way by ``GET /v1/runs``
and the console's runs page (whose form sends blank fields as empty strings)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Query

from arvis.domain.errors import ArvisError
from arvis.lifecycle.runs import RUN_STATUSES, RunCursor, RunQuery


class InvalidRunFilter(ArvisError):
    code = "validation_error"


def _moment(name: str, value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRunFilter(f"{name}: not an ISO 8601 time") from None
    # A time without its offset (a browser's datetime-local field) is UTC, as the
    # console shows every time.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


_Text = Annotated[str | None, Query(max_length=256)]
_Time = Annotated[
    str | None, Query(max_length=40, description="ISO 8601; without an offset it is UTC.")
]


def run_filters(
    q: Annotated[str | None, Query(max_length=128, description="A part of the run id.")] = None,
    status: Annotated[
        str | None, Query(max_length=32, description="One of: " + ", ".join(RUN_STATUSES) + ".")
    ] = None,
    principal: Annotated[_Text, Query(description="The principal the run is bound to.")] = None,
    actor: Annotated[
        _Text, Query(description="An agent that acted for the run's principal (exactly).")
    ] = None,
    tool: Annotated[_Text, Query(description="A tool the run asked for.")] = None,
    started_after: Annotated[_Time, Query(description="Started at or after (ISO 8601).")] = None,
    started_before: Annotated[_Time, Query(description="Started before (ISO 8601).")] = None,
    active_after: Annotated[_Time, Query(description="Last active at or after.")] = None,
    active_before: Annotated[_Time, Query(description="Last active before.")] = None,
    cursor: Annotated[
        str | None, Query(max_length=512, description="The next_cursor of the page before.")
    ] = None,
) -> RunQuery:
    if status and status not in RUN_STATUSES:
        raise InvalidRunFilter(f"status: one of {', '.join(RUN_STATUSES)}")
    return RunQuery(
        containing=q or None,
        status=status or None,
        principal=principal or None,
        actor=actor or None,
        tool=tool or None,
        started_after=_moment("started_after", started_after),
        started_before=_moment("started_before", started_before),
        active_after=_moment("active_after", active_after),
        active_before=_moment("active_before", active_before),
        after=RunCursor.decode(cursor) if cursor else None,
    )


RunFilters = Annotated[RunQuery, Depends(run_filters)]

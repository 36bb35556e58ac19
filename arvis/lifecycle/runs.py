"""The list of a tenant's runs: what a run's status is called, how the list is filtered,
and the cursor that pages it (``GET /v1/runs``, ``arvis runs``, the console's runs page).

The status is derived by the store's read from what the run's rows say, in this order
(the first that holds names it), so an operator sees what needs a person first:

| status | the run has |
| --- | --- |
| ``audit_incomplete`` | the flag: an effect's result could not be journaled |
| ``uncertain`` | an uncertain attempt nobody has resolved yet |
| ``waiting_for_consent`` | a confirmation still PENDING |
| ``refused`` | a refusal as its latest entry |
| ``running`` | none of the above |

``running`` covers a run whose calls all ended, too: ARVIS is not told when an agent's
run is over.

A run's ``principal`` is the principal it is bound to (the person, when an agent acts for
one) and its ``actors`` the agents that acted for that principal in any of its calls
(issue 26), read from what each call records (``arvis.store.reads``).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from arvis.domain.errors import ArvisError
from arvis.domain.ids import RunId
from arvis.lifecycle.records import RunStatus, RunSummary

RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
MAX_RUNS_PAGE = 200


class InvalidCursor(ArvisError):
    """A runs cursor that this list did not hand out."""

    code = "validation_error"


@dataclass(frozen=True, slots=True)
class RunCursor:
    """Where a page of runs ends: the list is newest first, then by run id descending."""

    created_at: datetime
    run_id: RunId

    def encode(self) -> str:
        text = f"{self.created_at.isoformat()}\x1f{self.run_id}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> RunCursor:
        try:
            text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            created_at, run_id = text.split("\x1f")
            moment = datetime.fromisoformat(created_at)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise InvalidCursor("not a cursor this list handed out") from None
        if moment.tzinfo is None or not run_id:
            raise InvalidCursor("not a cursor this list handed out")
        return cls(moment, RunId(run_id))


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Which of a tenant's runs to list; every filter is optional and they all hold."""

    limit: int = 50
    containing: str | None = None
    """A part of the run id."""
    status: RunStatus | None = None
    principal: str | None = None
    """The principal the run is bound to, exactly."""
    actor: str | None = None
    """An agent that acted for the run's principal in one of its calls, exactly."""
    tool: str | None = None
    """A tool the run asked for (any decision of the run, refused or not)."""
    started_after: datetime | None = None
    started_before: datetime | None = None
    active_after: datetime | None = None
    """Last activity at or after this time."""
    active_before: datetime | None = None
    after: RunCursor | None = None
    """The cursor of the page before this one."""


@dataclass(frozen=True, slots=True)
class RunsPage:
    runs: list[RunSummary]
    next_cursor: str | None
    """The cursor of the next (older) page; None on the last."""


def page_of(found: list[RunSummary], limit: int) -> RunsPage:
    """The first ``limit`` of ``found`` (the read asks for one more, to know whether
    another page follows)."""
    if len(found) <= limit:
        return RunsPage(found, None)
    last = found[limit - 1]
    return RunsPage(found[:limit], RunCursor(last.created_at, last.run_id).encode())


def summary_fields(run: RunSummary) -> dict[str, Any]:
    """A run as ``GET /v1/runs`` answers it (and ``arvis runs --json`` prints it)."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "principal": run.principal,
        "actors": list(run.actors),
        "tools": list(run.tools),
        "started_at": run.created_at,
        "last_activity": run.last_activity,
        "entries": run.entries,
        "waiting": run.waiting,
        "uncertain": run.uncertain,
        "audit_incomplete": run.audit_incomplete,
    }

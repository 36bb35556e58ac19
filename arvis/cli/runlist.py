"""``arvis runs``: the tenant's runs, status first, as ``GET /v1/runs`` lists them."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from arvis.cli.common import JsonFlag, fail, with_kernel
from arvis.cli.output import emit_json, table
from arvis.domain.errors import ArvisError
from arvis.domain.ids import TenantId
from arvis.domain.wire import RunInfo
from arvis.kernel import Kernel
from arvis.lifecycle.runs import MAX_RUNS_PAGE, RUN_STATUSES, RunsPage, summary_fields
from arvis.web.runs import run_filters


def runs(
    tenant: Annotated[str, typer.Option(help="The tenant whose runs to list.")],
    status: Annotated[str | None, typer.Option(help=" | ".join(RUN_STATUSES))] = None,
    principal: Annotated[str | None, typer.Option(help="Bound to this principal.")] = None,
    tool: Annotated[str | None, typer.Option(help="Asked for this tool.")] = None,
    q: Annotated[str | None, typer.Option("--q", help="A part of the run id.")] = None,
    started_after: Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset).")] = None,
    started_before: Annotated[str | None, typer.Option(help="ISO 8601.")] = None,
    active_after: Annotated[str | None, typer.Option(help="Last activity at or after.")] = None,
    active_before: Annotated[str | None, typer.Option(help="Last activity before.")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the page before.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_RUNS_PAGE, help="Page size.")] = 50,
    json_out: JsonFlag = False,
) -> None:
    """The tenant's runs, newest first, with status, principal, tools and last activity."""
    try:
        query = run_filters(
            q=q,
            status=status,
            principal=principal,
            tool=tool,
            started_after=started_after,
            started_before=started_before,
            active_after=active_after,
            active_before=active_before,
            cursor=cursor,
        )
    except ArvisError as exc:
        fail(exc.message, 2)

    async def use(kernel: Kernel) -> RunsPage:
        return await kernel.lifecycle.replay.runs(TenantId(tenant), replace(query, limit=limit))

    page = with_kernel(use)
    rows: list[dict[str, Any]] = [
        RunInfo(**summary_fields(r)).model_dump(mode="json") for r in page.runs
    ]
    if json_out:
        emit_json({"runs": rows, "next_cursor": page.next_cursor})
        return
    columns = ["status", "run_id", "principal", "tools", "started_at", "last_activity", "entries"]
    table(rows, columns, empty="no runs")
    if page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}")

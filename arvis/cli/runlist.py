"""``arvis runs``: the tenant's runs, status first, as ``GET /v1/runs`` lists them, from the
database or, in remote mode (arvis.cli.remote), from a server."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from arvis.cli.common import JsonFlag, fail, with_kernel
from arvis.cli.output import emit_json, table
from arvis.cli.remote import Remote, local_tenant, remote_capable, tenant_option
from arvis.client import ArvisClient
from arvis.domain.errors import ArvisError
from arvis.domain.identity import acting_for
from arvis.domain.ids import TenantId
from arvis.domain.wire import RunInfo
from arvis.kernel import Kernel
from arvis.lifecycle.runs import MAX_RUNS_PAGE, RUN_STATUSES, summary_fields
from arvis.web.runs import run_filters

_Time = Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset).")]
TenantOfRuns = Annotated[str | None, tenant_option("runs to list")]


@remote_capable
def runs(
    tenant: TenantOfRuns = None,
    status: Annotated[str | None, typer.Option(help=" | ".join(RUN_STATUSES))] = None,
    principal: Annotated[str | None, typer.Option(help="Bound to this principal.")] = None,
    actor: Annotated[
        str | None, typer.Option(help="An agent acted for the principal in one of its calls.")
    ] = None,
    tool: Annotated[str | None, typer.Option(help="Asked for this tool.")] = None,
    q: Annotated[str | None, typer.Option("--q", help="A part of the run id.")] = None,
    started_after: _Time = None,
    started_before: _Time = None,
    active_after: Annotated[str | None, typer.Option(help="Last activity at or after.")] = None,
    active_before: Annotated[str | None, typer.Option(help="Last activity before.")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the page before.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_RUNS_PAGE, help="Page size.")] = 50,
    json_out: JsonFlag = False,
    server: Remote | None = None,
) -> None:
    """The tenant's runs, newest first, with status, who (the principal, and the agent
    that acted for it), tools and last activity."""
    filters = {
        "q": q,
        "status": status,
        "principal": principal,
        "actor": actor,
        "tool": tool,
        "started_after": started_after,
        "started_before": started_before,
        "active_after": active_after,
        "active_before": active_before,
    }
    try:
        # Checked here in both modes: a bad filter is exit 2 before any request.
        query = replace(run_filters(**filters, cursor=cursor), limit=limit)
    except ArvisError as exc:
        fail(exc.message, 2)

    if server is not None:

        def ask(client: ArvisClient) -> tuple[list[RunInfo], str | None]:
            page = client.runs(cursor=cursor, limit=limit, **filters)
            return [RunInfo.model_validate(r.model_dump()) for r in page.runs], page.next_cursor

        found, next_cursor = server.call(ask)
    else:
        tenant_id = TenantId(local_tenant(tenant))

        async def use(kernel: Kernel) -> tuple[list[RunInfo], str | None]:
            page = await kernel.lifecycle.replay.runs(tenant_id, query)
            return [RunInfo(**summary_fields(r)) for r in page.runs], page.next_cursor

        found, next_cursor = with_kernel(use)
    rows: list[dict[str, Any]] = [r.model_dump(mode="json") for r in found]
    if json_out:
        emit_json({"runs": rows, "next_cursor": next_cursor})
        return
    shown = [{**r, "who": _who(r["principal"], r["actors"])} for r in rows]
    columns = ["status", "run_id", "who", "tools", "started_at", "last_activity", "entries"]
    table(shown, columns, empty="no runs", uncut=("who",))
    if next_cursor is not None:
        typer.echo(f"more: --cursor {next_cursor}")


def _who(principal: str | None, actors: list[str]) -> str:
    """The run's principal, and the agents that acted for it: ``agent bot for alice``."""
    return acting_for(principal or "-", actors)

"""``arvis tools``, ``journal``, ``verify``, ``replay`` and ``turn``: the HTTP ground, offline."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer

from arvis.bootstrap import Kernel, build_kernel, load_tools
from arvis.cli_common import fail, settings_or_exit
from arvis.cli_output import emit_json, table
from arvis.cli_turn import OPERATOR_PRINCIPAL, governed_turn, operator_identity
from arvis.config import Environment, load_file_config
from arvis.domain.errors import ArvisError
from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.results import SyscallResult
from arvis.tools.describe import describe_plan
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import StaticToolPlanSource

T = TypeVar("T")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
TenantOption = Annotated[str, typer.Option(help="The tenant whose run this is.")]
RunArgument = Annotated[str, typer.Argument(help="The run id.")]


def _with_kernel(use: Callable[[Kernel], Awaitable[T]], *, admits: bool = False) -> T:
    """Build a kernel, use it, close it. A command that ``admits`` syscalls first
    claims a lease and settles what earlier lives left (DESIGN §6), like ``serve``."""
    settings = settings_or_exit()

    async def main() -> T:
        try:
            kernel = await build_kernel(settings)
        except ArvisError as exc:
            fail(exc.message)
        try:
            if admits:
                await kernel.start()
            return await use(kernel)
        except ArvisError as exc:
            fail(exc.message)
        finally:
            await kernel.close()

    return asyncio.run(main())


def register(app: typer.Typer) -> None:
    app.command("tools")(tools)
    app.command("journal")(journal)
    app.command("verify")(verify)
    app.command("replay")(replay)
    app.command("turn")(turn)


def tools(json_out: JsonFlag = False) -> None:
    """The declared tools of the current plan, with their governance metadata."""
    import httpx

    settings = settings_or_exit()

    async def listing() -> list[dict[str, Any]]:
        # Listing tools never calls one; the client exists only for tool constructors,
        # and upstream MCP servers are started only to read their tool lists.
        async with httpx.AsyncClient() as http:
            loaded = await load_tools(settings, load_file_config(settings), http)
            try:
                dispatcher = ToolDispatcher(loaded.tools)
            finally:
                await loaded.aclose()
        return describe_plan(StaticToolPlanSource(dispatcher).current)

    try:
        rows = asyncio.run(listing())
    except ArvisError as exc:
        fail(exc.message)
    if json_out:
        emit_json(rows)
        return
    columns = ["name", "effect", "replay_safety", "capabilities", "fingerprint"]
    table([{**r, "fingerprint": r["fingerprint"][:16]} for r in rows], columns, empty="no tools")
    if rows:
        typer.echo(f"plan {rows[0]['plan_id']}")


def journal(
    run: RunArgument,
    tenant: TenantOption,
    after: Annotated[int, typer.Option(min=0, help="Entries after this position.")] = 0,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many entries.")] = 1000,
    json_out: JsonFlag = False,
) -> None:
    """The run's journal entries in chain order."""

    async def use(kernel: Kernel) -> list[dict[str, Any]]:
        entries = await kernel.lifecycle.replay.journal(TenantId(tenant), RunId(run), after, limit)
        return [
            {
                "position": e.position,
                "kind": e.kind,
                "causal_id": e.causal_id,
                "idempotency_key": e.idempotency_key,
                "attempt": e.attempt,
                "boundary": e.boundary,
                "tool": e.body.get("tool"),
                "body": e.body,
                "prev_hash": e.prev_hash,
                "entry_hash": e.entry_hash,
                "recorded_at": e.recorded_at.isoformat(),
            }
            for e in entries
        ]

    rows = _with_kernel(use)
    if json_out:
        emit_json(rows)
        return
    shown = [{**r, "entry_hash": r["entry_hash"][:16]} for r in rows]
    columns = ["position", "kind", "causal_id", "tool", "attempt", "boundary", "entry_hash"]
    table(shown, columns, empty="no entries")


def verify(run: RunArgument, tenant: TenantOption, json_out: JsonFlag = False) -> None:
    """Recompute the run's hash chain. Exits 1 when it is broken."""

    async def use(kernel: Kernel) -> dict[str, Any]:
        report = await kernel.lifecycle.replay.verify(TenantId(tenant), RunId(run))
        return {
            "ok": report.ok,
            "entries": report.entries,
            "broken_at": report.broken_at,
            "reason": report.reason,
        }

    report = _with_kernel(use)
    if json_out:
        emit_json(report)
    elif report["ok"]:
        typer.echo(f"run {run}: chain intact, {report['entries']} entries")
    else:
        typer.echo(f"run {run}: chain BROKEN at position {report['broken_at']}: {report['reason']}")
    if not report["ok"]:
        raise typer.Exit(1)


def replay(run: RunArgument, tenant: TenantOption, json_out: JsonFlag = False) -> None:
    """The recorded result of each decision in causal order. Runs nothing."""

    async def use(kernel: Kernel) -> list[SyscallResult]:
        return await kernel.lifecycle.replay.replay(TenantId(tenant), RunId(run))

    results = _with_kernel(use)
    if json_out:
        emit_json([r.model_dump(mode="json") for r in results])
        return
    _outcome_table(results)


def _outcome_table(results: list[SyscallResult]) -> None:
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


def turn(
    run: Annotated[str, typer.Option(help="The run the decisions belong to.")],
    prompt: Annotated[str, typer.Option(help="What to ask the model.")],
    tenant: Annotated[str, typer.Option(help="The tenant the run belongs to.")] = "default",
    json_out: JsonFlag = False,
) -> None:
    """One agent turn: ask the configured model once, govern each finalized call.

    Each call goes through tool.execute with its call id as causal id, as the
    operator identity ``cli`` (method "development"); refused under ARVIS_ENV=production.
    """
    settings = settings_or_exit()
    if settings.env is Environment.PRODUCTION:
        fail(
            f"arvis turn acts as the development identity {OPERATOR_PRINCIPAL!r}, which"
            " ARVIS_ENV=production refuses; drive production agents through the HTTP API"
        )

    async def use(kernel: Kernel) -> list[SyscallResult]:
        from arvis.providers.config import build_provider, load_provider_config

        provider = build_provider(kernel.file_config, os.environ)
        config = load_provider_config(kernel.file_config)
        if provider is None or config is None:
            fail("no [provider] section in arvis.toml; see docs/providers.md")
        return await governed_turn(
            kernel.lifecycle,
            provider,
            config.request,
            prompt=prompt,
            run_id=run,
            identity=operator_identity(tenant),
            on_text=None if json_out else lambda text: typer.echo(text, nl=False),
        )

    results = _with_kernel(use, admits=True)
    if json_out:
        emit_json([r.model_dump(mode="json") for r in results])
        return
    typer.echo("")
    _outcome_table(results)

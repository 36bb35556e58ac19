"""``arvis tools``, ``journal``, ``verify`` and ``replay``: the auditor's HTTP ground, offline."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from arvis.cli import evidence
from arvis.cli.common import JsonFlag, fail, settings_or_exit, with_kernel
from arvis.cli.output import emit_json, outcome_table, table
from arvis.deployment import declared_plan
from arvis.domain.errors import ArvisError
from arvis.domain.ids import RunId, TenantId
from arvis.kernel import Kernel
from arvis.lifecycle.evidence.report import EvidenceReport
from arvis.lifecycle.results import SyscallResult
from arvis.tools.describe import describe_plan

T = TypeVar("T")

TenantOption = Annotated[str, typer.Option(help="The tenant whose run this is.")]
RunArgument = Annotated[str, typer.Argument(help="The run id.")]


def register(app: typer.Typer) -> None:
    app.command("tools")(tools)
    app.command("journal")(journal)
    app.command("verify")(verify)
    app.command("replay")(replay)


def tools(json_out: JsonFlag = False) -> None:
    """The declared tools of the current plan, with their governance metadata."""
    settings = settings_or_exit()
    try:
        plan = asyncio.run(declared_plan(settings))
    except ArvisError as exc:
        fail(exc.message)
    rows = describe_plan(plan)
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

    rows = with_kernel(use)
    if json_out:
        emit_json(rows)
        return
    shown = [{**r, "entry_hash": r["entry_hash"][:16]} for r in rows]
    columns = ["position", "kind", "causal_id", "tool", "attempt", "boundary", "entry_hash"]
    table(shown, columns, empty="no entries")


def verify(
    run: Annotated[str | None, typer.Argument(help="The run id (not with --bundle).")] = None,
    tenant: Annotated[str | None, typer.Option(help="The tenant whose run this is.")] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(help="Check every signed checkpoint with this public key (PEM)."),
    ] = None,
    witness: Annotated[
        Path | None,
        typer.Option(help="Cross-check the run against this witness file (and its rotations)."),
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(help="Check an exported audit bundle offline, with no database."),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Recompute the run's hash chain, check its signed checkpoints and its witness.
    Without --public-key or --witness, with the deployment's configured key and file
    witness (what GET /v1/runs/{id}/verify answers). Exits 1 when it is broken,
    rewritten or disputed, or (a bundle with a trusted key) not covered by signed
    checkpoints."""
    if bundle is not None:
        if run is not None:
            fail("give a run or --bundle, not both", 2)
        evidence.verify_bundle_file(bundle, public_key, witness, json_out)
        return
    if run is None or tenant is None:
        fail("name the run and --tenant (or give --bundle FILE)", 2)
    if public_key is not None or witness is not None:
        evidence.verify_with_evidence(run, tenant, public_key, witness, json_out)
        return
    tenant_id = tenant

    async def use(kernel: Kernel) -> tuple[EvidenceReport, bool, bool]:
        # The deployment's own key and witness: the verification the API answers.
        evidence_service = kernel.lifecycle.evidence
        report = await evidence_service.verify(TenantId(tenant_id), RunId(run))
        return report, evidence_service.key is not None, evidence_service.witness is not None

    report, keyed, witnessed = with_kernel(use)
    evidence.print_report(run, report, json_out, key=keyed, witness=witnessed)


def replay(run: RunArgument, tenant: TenantOption, json_out: JsonFlag = False) -> None:
    """The recorded result of each decision in causal order. Runs nothing."""

    async def use(kernel: Kernel) -> list[SyscallResult]:
        return await kernel.lifecycle.replay.replay(TenantId(tenant), RunId(run))

    results = with_kernel(use)
    if json_out:
        emit_json([r.model_dump(mode="json") for r in results])
        return
    outcome_table(results)

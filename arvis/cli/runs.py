"""``arvis tools``, ``journal``, ``verify`` and ``replay``: the auditor's HTTP ground, from
the database or, in remote mode (arvis.cli.remote), from a server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError

from arvis.cli import evidence
from arvis.cli.common import JsonFlag, deployment_or_exit, fail, settings_or_exit, with_kernel
from arvis.cli.output import emit_json, outcome_table, table
from arvis.cli.remote import Remote, TenantOption, local_tenant, remote_capable
from arvis.client import SyscallAnswer
from arvis.domain.ids import RunId, TenantId
from arvis.domain.journal import caller, read_artifact
from arvis.kernel import Kernel
from arvis.lifecycle.evidence.report import EvidenceReport
from arvis.lifecycle.results import SyscallResult
from arvis.tools.describe import describe_plan

T = TypeVar("T")

RunArgument = Annotated[str, typer.Argument(help="The run id.")]


def register(app: typer.Typer) -> None:
    app.command("tools")(tools)
    app.command("journal")(journal)
    app.command("verify")(verify)
    app.command("replay")(replay)


def tools(json_out: JsonFlag = False) -> None:
    """The declared tools of the current plan, with their governance metadata."""
    # The check serve runs: a file serve refuses lists nothing (exit 1).
    rows = describe_plan(deployment_or_exit(settings_or_exit()))
    if json_out:
        emit_json(rows)
        return
    columns = ["name", "effect", "replay_safety", "capabilities", "fingerprint"]
    table([{**r, "fingerprint": r["fingerprint"][:16]} for r in rows], columns, empty="no tools")
    if rows:
        typer.echo(f"plan {rows[0]['plan_id']}")


def _journal_row(entry: Any) -> dict[str, Any]:
    """One entry as ``arvis journal`` prints it: a stored entry and the API's alike."""
    boundary = entry.boundary
    return {
        "position": entry.position,
        "kind": entry.kind,
        "causal_id": entry.causal_id,
        "idempotency_key": entry.idempotency_key,
        "attempt": entry.attempt,
        "boundary": getattr(boundary, "value", boundary),
        "tool": entry.body.get("tool"),
        "body": entry.body,
        "prev_hash": entry.prev_hash,
        "entry_hash": entry.entry_hash,
        "recorded_at": entry.recorded_at.isoformat(),
    }


@remote_capable
def journal(
    run: RunArgument,
    tenant: TenantOption = None,
    after: Annotated[int, typer.Option(min=0, help="Entries after this position.")] = 0,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many entries.")] = 1000,
    json_out: JsonFlag = False,
    server: Remote | None = None,
) -> None:
    """The run's journal entries in chain order."""
    if server is not None:
        page = server.call(lambda client: client.journal(run, after=after, limit=limit))
        rows = [_journal_row(e) for e in page.entries]
    else:
        tenant_id = TenantId(local_tenant(tenant))

        async def use(kernel: Kernel) -> list[dict[str, Any]]:
            entries = await kernel.lifecycle.replay.journal(tenant_id, RunId(run), after, limit)
            return [_journal_row(e) for e in entries]

        rows = with_kernel(use)
    if json_out:
        emit_json(rows)
        return
    shown = [{**r, "entry_hash": r["entry_hash"][:16], "by": _by(r)} for r in rows]
    columns = ["position", "kind", "causal_id", "tool", "attempt", "boundary", "entry_hash", "by"]
    table(shown, columns, empty="no entries", uncut=("by",))


def _by(row: dict[str, Any]) -> str | None:
    """Who made the entry's call or decision (``agent bot for alice`` when an agent acted
    for a person, issue 26); None for a kind or a body this version cannot read."""
    try:
        return caller(read_artifact(row["kind"], json.dumps(row["body"])))
    except (KeyError, ValidationError):
        return None


@remote_capable
def verify(
    run: Annotated[str | None, typer.Argument(help="The run id (not with --bundle).")] = None,
    tenant: TenantOption = None,
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
    server: Remote | None = None,
) -> None:
    """Recompute the run's hash chain, check its signed checkpoints and its witness.
    Without --public-key or --witness, with the deployment's configured key and file
    witness (what GET /v1/runs/{id}/verify answers). Exits 1 when it is broken,
    rewritten or disputed, or (a bundle with a trusted key) not covered by signed
    checkpoints. In remote mode, --public-key and --witness check the run's bundle
    as served (GET /v1/runs/{id}/bundle) here, with the key and witness given."""
    if bundle is not None:
        if run is not None:
            fail("give a run or --bundle, not both", 2)
        evidence.verify_bundle_file(bundle, public_key, witness, json_out)
        return
    if run is None:
        fail("name the run (or give --bundle FILE)", 2)
    if server is not None:
        evidence.verify_remote(server, run, public_key, witness, json_out)
        return
    tenant_id = TenantId(local_tenant(tenant))
    if public_key is not None or witness is not None:
        evidence.verify_with_evidence(run, tenant_id, public_key, witness, json_out)
        return

    async def use(kernel: Kernel) -> tuple[EvidenceReport, bool, bool]:
        # The deployment's own key and witness: the verification the API answers.
        evidence_service = kernel.lifecycle.evidence
        report = await evidence_service.verify(tenant_id, RunId(run))
        return report, evidence_service.key is not None, evidence_service.witness is not None

    report, keyed, witnessed = with_kernel(use)
    evidence.print_report(run, report, json_out, key=keyed, witness=witnessed)


@remote_capable
def replay(
    run: RunArgument,
    tenant: TenantOption = None,
    json_out: JsonFlag = False,
    server: Remote | None = None,
) -> None:
    """The recorded result of each decision in causal order. Runs nothing."""
    results: Sequence[SyscallResult | SyscallAnswer]
    if server is not None:
        results = server.call(lambda client: list(client.iter_replay(run)))
    else:
        tenant_id = TenantId(local_tenant(tenant))

        async def use(kernel: Kernel) -> list[SyscallResult]:
            return await kernel.lifecycle.replay.replay(tenant_id, RunId(run))

        results = with_kernel(use)
    if json_out:
        emit_json([r.model_dump(mode="json") for r in results])
        return
    outcome_table(results)

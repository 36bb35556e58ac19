"""``arvis keys signing …``, ``arvis export`` and the evidence side of ``arvis verify``."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from arvis.cli.common import fail, settings_or_exit, with_kernel
from arvis.cli.output import emit_json
from arvis.cli.remote import Remote, TenantOption, local_tenant, remote_capable
from arvis.domain.errors import ArvisError
from arvis.domain.ids import RunId, TenantId
from arvis.evidence.bundle import verify_bundle
from arvis.evidence.export import Exported
from arvis.evidence.keys import PublicKey, SigningKey
from arvis.evidence.witness import read_witness
from arvis.kernel import Kernel
from arvis.lifecycle.evidence.report import EvidenceReport

signing_app = typer.Typer(
    help="The Ed25519 key that signs run checkpoints (ARVIS_SIGNING_KEY_FILE).",
    no_args_is_help=True,
)

KeyFileOption = Annotated[
    Path | None,
    typer.Option("--file", help="The key file; default: ARVIS_SIGNING_KEY_FILE."),
]


def _key_path(path: Path | None) -> Path:
    path = path or settings_or_exit().signing_key_file
    if path is None:
        fail("name the key file with --file or ARVIS_SIGNING_KEY_FILE", 2)
    return path


@signing_app.command("create")
def create_signing_key(file: KeyFileOption = None) -> None:
    """Make a new signing key (mode 0600). An existing file is never overwritten."""
    path = _key_path(file)
    try:
        key = SigningKey.create(path)
    except ArvisError as exc:
        fail(exc.message)
    typer.echo(f"created signing key {key.key_id} in {path}; its public key:")
    typer.echo(key.public.pem, nl=False)


@signing_app.command("public")
def public_signing_key(file: KeyFileOption = None) -> None:
    """Print the signing key's public key (PEM), for auditors to verify with."""
    try:
        key = SigningKey.load(_key_path(file))
    except ArvisError as exc:
        fail(exc.message)
    typer.echo(key.public.pem, nl=False)


def _public_key(path: Path | None) -> PublicKey | None:
    if path is None:
        return None
    try:
        return PublicKey.load(path)
    except ArvisError as exc:
        fail(exc.message, 2)


@remote_capable
def export(
    run: Annotated[str, typer.Argument(help="The run id.")],
    tenant: TenantOption = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here; default: standard output.")
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(help="The public key to embed; default: the deployment's (local mode)."),
    ] = None,
    server: Remote | None = None,
) -> None:
    """Write one self-contained audit bundle of the run, for `arvis verify --bundle`."""
    if server is not None:
        if public_key is not None:
            fail("--public-key is for local export: a served bundle embeds the server's key", 2)
        served = server.call(lambda client: client.bundle(run))
        data, head_signed = served.data, served.head_signed
    else:
        given = _public_key(public_key)
        tenant_id = TenantId(local_tenant(tenant))

        async def use(kernel: Kernel) -> Exported:
            return await kernel.bundles.export(tenant_id, RunId(run), given)

        exported = with_kernel(use)
        data, head_signed = exported.data, exported.head_signed
    if not head_signed:
        typer.echo(
            f"arvis: warning: the head of run {run} was not signed (see the log):"
            " its last entries will not verify with the public key",
            err=True,
        )
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        output.write_bytes(data)
        typer.echo(f"wrote the bundle of run {run} ({len(data)} bytes) to {output}", err=True)


def verify_remote(
    server: Remote, run: str, public_key: Path | None, witness: Path | None, json_out: bool
) -> None:
    """``arvis verify RUN`` in remote mode. With the auditor's own key or witness, the
    run's bundle as served is checked here (the server's word is not taken for it);
    without, the server's verification is printed."""
    if public_key is not None or witness is not None:
        trusted = _public_key(public_key)
        # The witness first: whatever it holds was committed before the bundle is built,
        # so the bundle is checked as the run as it stands (a deleted tail shows).
        records = None if witness is None else _witness_records(witness)
        served = server.call(lambda client: client.bundle(run))
        served_at = datetime.now(UTC)
        label = f"run {run} (as served)"
        _verify_bundle(served.data, label, trusted, records, json_out, served_at=served_at)
        return
    answer = server.call(lambda client: client.verify(run))
    fields = {f.name for f in dataclasses.fields(EvidenceReport)}
    report = EvidenceReport(
        **{
            **{k: v for k, v in answer.model_dump().items() if k in fields},
            "checkpoints": answer.checkpoints or 0,
        }
    )
    # The API does not say whether a witness is configured: only a disagreement shows.
    print_report(run, report, json_out, key=answer.checkpoints is not None, witness=False)


def verify_bundle_file(
    bundle: Path, public_key: Path | None, witness: Path | None, json_out: bool
) -> None:
    """``arvis verify --bundle FILE``: offline, no database, no settings needed."""
    trusted = _public_key(public_key)
    records = None if witness is None else _witness_records(witness)
    try:
        data = bundle.read_bytes()
    except OSError as exc:
        fail(f"cannot read {bundle}: {exc.strerror}", 2)
    _verify_bundle(data, str(bundle), trusted, records, json_out)


def _verify_bundle(
    data: bytes,
    label: str,
    trusted: PublicKey | None,
    records: list[dict[str, Any]] | None,
    json_out: bool,
    *,
    served_at: datetime | None = None,
) -> None:
    """Check a bundle's bytes and print the verdict; exits 1 when it does not verify."""
    try:
        report = asyncio.run(verify_bundle(data, trusted, records, served_at=served_at))
    except ArvisError as exc:
        if json_out:
            emit_json({"ok": False, "problem": exc.message})
        else:
            typer.echo(f"bundle {label}: INVALID: {exc.message}")
        raise typer.Exit(1) from None
    if json_out:
        emit_json(report.as_json())
    elif report.ok:
        key = "no key" if report.key_id is None else f"key {report.key_id}"
        head = (
            "no signed head"
            if report.signed_at is None
            else f"last signed head: {report.signed_length} entries at {report.signed_at}"
        )
        if trusted is not None:
            trust = "trusted key given: every entry covered"
        else:
            trust = "no trusted key given: compare the key id"
            if report.unverified:
                trust += f"; {report.unverified} entries after the last signed head"
        typer.echo(
            f"bundle of run {report.run_id} (tenant {report.tenant_id}): intact,"
            f" {report.entries} entries, {report.checkpoints} checkpoints signed by {key}"
            f" ({trust}; {head})"
        )
    elif report.unverified:
        typer.echo(f"bundle of run {report.run_id}: NOT VERIFIED: {report.problem}")
    else:
        typer.echo(f"bundle of run {report.run_id}: INVALID: {report.problem}")
    if not report.ok:
        raise typer.Exit(1)


def _witness_records(witness: Path) -> list[dict[str, Any]]:
    try:
        return [record for _, _, record in read_witness(witness)]
    except (OSError, ValueError) as exc:
        fail(f"cannot read the witness {witness}: {exc}", 2)


def verify_with_evidence(
    run: str,
    tenant: TenantId,
    public_key: Path | None,
    witness: Path | None,
    json_out: bool,
) -> None:
    """``arvis verify RUN`` with ``--public-key`` and/or ``--witness``: the auditor's own
    key and witness in place of the deployment's (the same check; nothing is flagged)."""
    trusted = _public_key(public_key)
    records = None if witness is None else _witness_records(witness)

    async def use(kernel: Kernel) -> EvidenceReport:
        return await kernel.lifecycle.evidence.verify_with(
            tenant, RunId(run), key=trusted, witness=records
        )

    report = with_kernel(use)
    print_report(run, report, json_out, key=trusted is not None, witness=witness is not None)


def print_report(
    run: str, report: EvidenceReport, json_out: bool, *, key: bool, witness: bool
) -> None:
    """What ``arvis verify RUN`` prints; exits 1 when the run does not verify."""
    if json_out:
        emit_json(report.as_json())
    elif report.ok:
        parts = [f"chain intact, {report.entries} entries"]
        if key:
            parts.append(f"{report.checkpoints} signed checkpoints hold")
            if report.unsigned:
                parts.append(f"{report.unsigned} entries after the last one")
        if witness:
            parts.append("the witness agrees")
        typer.echo(f"run {run}: " + ", ".join(parts))
    elif report.witness is not None:
        typer.echo(f"run {run}: the witness DISAGREES: {report.witness}")
    elif report.rewritten_before is not None:
        typer.echo(f"run {run}: REWRITTEN: {report.reason}")
    elif report.flagged is not None and report.reason and report.reason.startswith("flagged"):
        typer.echo(f"run {run}: evidence found BROKEN before: {report.flagged}")
    else:
        typer.echo(f"run {run}: chain BROKEN at position {report.broken_at}: {report.reason}")
    if not report.ok:
        raise typer.Exit(1)

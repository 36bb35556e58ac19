"""``arvis resolve`` and ``arvis notify …``: what an operator settles and is told (issue 16)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from arvis.cli.common import JsonFlag, fail, with_kernel
from arvis.cli.output import emit_json, table
from arvis.cli.remote import UrlOption, remote
from arvis.client import KEY_VARIABLE
from arvis.domain.ids import RunId
from arvis.domain.journal import ResolutionArtifact
from arvis.identity.errors import IdentityRefusal
from arvis.kernel import Kernel
from arvis.lifecycle.consent.resolution import RESOLVED_AS

notify_app = typer.Typer(help="The notification outbox.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("resolve")(resolve)
    app.add_typer(notify_app, name="notify")


def resolve(
    run: Annotated[str, typer.Argument(help="The run id.")],
    key: Annotated[str, typer.Argument(help="The attempt's idempotency key.")],
    attempt: Annotated[int, typer.Argument(min=1, help="The attempt number.")],
    as_: Annotated[
        str, typer.Option("--as", help="What it did: completed, failed or not_started.")
    ],
    evidence: Annotated[str, typer.Option(help="How you know (journaled as given).")],
    json_out: JsonFlag = False,
    url: UrlOption = None,
    key_option: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar=KEY_VARIABLE,
            help=f"The resolver's API key; default: {KEY_VARIABLE}.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Resolve an uncertain attempt, as the principal of ARVIS_API_KEY (an API key or a JWT;
    or --key): on the server at ARVIS_URL (or --url), else on the database.

    The key needs the approver (or admin) role; the tenant is the key's. The
    principal whose call it was may not resolve it (four eyes). Resolved as
    not_started, an attempt that ran under consent opens a new round of approval of
    that consent; the resolution counts as one approval when the key could approve."""
    boundary = RESOLVED_AS.get(as_)
    if boundary is None:
        fail("--as must be completed, failed or not_started", 2)
    if not evidence.strip():
        fail("--evidence must say how you know", 2)
    token = key_option or ""
    if not token:
        fail(
            f"set {KEY_VARIABLE} to an approver's API key or token: the resolver is its principal",
            2,
        )
    server = remote(url, token)
    if server is not None:
        resolution = server.call(
            lambda client: client.resolve(run, key, attempt, as_=as_, evidence=evidence)
        )
        _print_resolution(resolution.model_dump(mode="json"), key, attempt, json_out)
        return

    async def use(kernel: Kernel) -> dict[str, Any]:
        try:
            identity = await kernel.identities.authenticate(token)
        except IdentityRefusal as refused:
            fail(f"the credential in {KEY_VARIABLE} was refused ({refused.code}): {refused}")
        if not identity.has_role("approver"):
            fail("resolving needs a key with the approver or admin role")
        entry = await kernel.lifecycle.resolutions.resolve(
            identity, RunId(run), key, attempt, boundary, evidence
        )
        artifact = entry.artifact
        assert isinstance(artifact, ResolutionArtifact)
        return {
            "run_id": entry.run_id,
            "causal_id": entry.causal_id,
            "idempotency_key": entry.idempotency_key,
            "attempt": artifact.attempt,
            "boundary": artifact.boundary.value,
            "resolves": artifact.resolves.position,
            "resolved_by": artifact.resolved_by.principal_id,
            "evidence": artifact.evidence,
            "journal_position": entry.position,
            "entry_hash": entry.entry_hash,
            "recorded_at": entry.recorded_at.isoformat(),
            "consent": None
            if artifact.consent is None
            else artifact.consent.model_dump(mode="json"),
        }

    _print_resolution(with_kernel(use), key, attempt, json_out)


def _print_resolution(answer: dict[str, Any], key: str, attempt: int, json_out: bool) -> None:
    if json_out:
        emit_json(answer)
        return
    typer.echo(
        f"attempt {attempt} of {key[:16]}… resolved as {answer['boundary']} by "
        f"{answer['resolved_by']} (journal position {answer['journal_position']}, "
        f"resolving position {answer['resolves']})"
    )
    consent = answer["consent"]
    if consent is not None:
        typer.echo(
            f"consent {consent['confirmation_id']} opened round {consent['round']}: "
            f"{consent['state']}, {consent['approvals']} of {consent['quorum']} approvals"
            + (
                "; the next attempt runs under it"
                if consent["state"] == "APPROVED"
                else "; the next attempt waits for its approvers"
            )
        )


@notify_app.command("list")
def list_events(
    state: Annotated[
        str | None, typer.Option(help="PENDING, DELIVERED or DEAD (undeliverable).")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's events.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    json_out: JsonFlag = False,
) -> None:
    """Outbox events, newest first, with their delivery state."""
    if state is not None and state.upper() not in ("PENDING", "DELIVERED", "DEAD"):
        fail("--state must be PENDING, DELIVERED or DEAD", 2)

    async def use(kernel: Kernel) -> list[dict[str, Any]]:
        rows = await kernel.outbox.list(
            state=None if state is None else state.upper(), tenant_id=tenant, limit=limit
        )
        return [
            {
                **row,
                "delivered_to": list(row["delivered_to"]),
                **{
                    name: None if row[name] is None else row[name].isoformat()
                    for name in ("occurred_at", "next_attempt_at", "delivered_at")
                },
            }
            for row in rows
        ]

    rows = with_kernel(use)
    if json_out:
        emit_json(rows)
        return
    columns = ["tenant_id", "event_id", "event_type", "state", "attempts", "last_error"]
    table(rows, columns, empty="no events")


@notify_app.command("retry")
def retry_dead(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's events.")] = None,
) -> None:
    """Give every DEAD event a fresh round of delivery attempts."""

    async def use(kernel: Kernel) -> int:
        return await kernel.outbox.retry_dead(tenant_id=tenant)

    typer.echo(f"{with_kernel(use)} dead events will be delivered again")

"""``arvis keys …`` and the quick start's demo keys."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from arvis.bootstrap import Administration
from arvis.cli.common import database_or_exit, fail, settings_or_exit, with_administration
from arvis.cli.output import emit_json, table
from arvis.cli.remote import TENANT_VARIABLE, Remote, local_tenant, remote_capable
from arvis.client import ApiKey
from arvis.domain.apikeys import ApiKeyRecord
from arvis.domain.authorization import GROUP_PATTERN
from arvis.domain.identity import ROLES, Role

keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)

DEMO_TENANT = "demo"
DEMO_ROLES: tuple[Role, ...] = ROLES
DEMO_KEYS_FILE = "demo-keys.json"
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
TenantScope = Annotated[
    str | None,
    typer.Option(
        envvar=TENANT_VARIABLE,
        help=f"Only this tenant's keys (revoke: refuse unless the key is this tenant's);"
        f" default: {TENANT_VARIABLE}. Remote mode: the admin key's tenant.",
        show_default=False,
    ),
]


def _row(record: ApiKeyRecord | ApiKey) -> dict[str, Any]:
    """A key as ``arvis keys list`` prints it: a stored key and the API's alike."""
    return {
        "tenant": record.tenant_id,
        "key_id": record.key_id,
        "principal": record.principal,
        "roles": list(record.roles),
        "groups": list(record.groups),
        "created_at": _seconds(record.created_at),
        "revoked_at": _seconds(record.revoked_at),
    }


def _seconds(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")


def _url() -> str:
    return database_or_exit(settings_or_exit()).url


@keys_app.command("create")
@remote_capable
def create(
    principal: Annotated[str, typer.Option(help="Who uses the key (recorded in the journal).")],
    role: Annotated[list[str], typer.Option(help="agent, approver, auditor or admin; repeatable.")],
    tenant: Annotated[
        str | None,
        typer.Option(
            envvar=TENANT_VARIABLE,
            help=f"The only tenant this key can touch; default: {TENANT_VARIABLE}."
            " Remote mode: the admin key's.",
            show_default=False,
        ),
    ] = None,
    group: Annotated[
        list[str] | None,
        typer.Option(
            help="An approver group the key belongs to (e.g. payments-leads); repeatable."
        ),
    ] = None,
    server: Remote | None = None,
) -> None:
    """Create a key. Its token is printed once, as the last line; only a hash is stored."""
    roles = _roles(role)
    if not principal.strip():
        fail("--principal must not be empty", 2)
    groups = group or []
    for name in groups:
        if not re.fullmatch(GROUP_PATTERN, name):
            fail(f"{name!r} is not a group name (lowercase letters, digits, '.', '_', '-')", 2)
    if server is not None:
        created = server.call(lambda client: client.create_key(principal, roles, groups=groups))
        _print_created(created.key_id, created.principal, created.tenant_id, roles, groups)
        typer.echo(created.token)
        return
    tenant_id = local_tenant(tenant and tenant.strip())

    async def use(admin: Administration) -> tuple[ApiKeyRecord, str]:
        record, issued = await admin.keys.create(tenant_id, principal, roles, groups)
        return record, issued.token

    record, token = with_administration(_url(), use)
    _print_created(record.key_id, record.principal, record.tenant_id, record.roles, record.groups)
    typer.echo(token)


def _print_created(
    key_id: str,
    principal: str,
    tenant: str | None,
    roles: Sequence[str],
    groups: Sequence[str],
) -> None:
    typer.echo(
        f"created key {key_id} for {principal}"
        + (f" in tenant {tenant}" if tenant else "")
        + f" ({', '.join(roles)})"
        + (f" in groups {', '.join(groups)}" if groups else "")
        + "; the token below is shown only now:"
    )


def _roles(given: list[str]) -> list[Role]:
    known: tuple[Role, ...] = ("agent", "approver", "auditor", "admin")
    roles: list[Role] = []
    for name in given:
        if name not in known:
            fail(f"unknown role {name!r}; choose from {', '.join(known)}", 2)
        roles.extend(r for r in known if r == name)
    return roles


@keys_app.command("list")
@remote_capable
def list_keys(
    tenant: TenantScope = None,
    json_out: JsonFlag = False,
    server: Remote | None = None,
) -> None:
    """List keys (never their secrets)."""
    if server is not None:
        rows = [_row(k) for k in server.call(lambda client: client.keys())]
    else:

        async def use(admin: Administration) -> list[ApiKeyRecord]:
            return await admin.keys.list(tenant)

        rows = [_row(r) for r in with_administration(_url(), use)]
    if json_out:
        emit_json(rows)
        return
    columns = ["tenant", "key_id", "principal", "roles", "groups", "created_at", "revoked_at"]
    table(rows, columns, empty="no keys")


@keys_app.command("revoke")
@remote_capable
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (kXXXXXXXXXXXXXXXX).")],
    tenant: TenantScope = None,
    server: Remote | None = None,
) -> None:
    """Revoke a key; requests with it are refused from now on."""
    if server is not None:
        server.call(lambda client: client.revoke_key(key_id))
    else:

        async def use(admin: Administration) -> bool:
            return await admin.keys.revoke(key_id, tenant)

        if not with_administration(_url(), use):
            fail(f"no live key {key_id}")
    typer.echo(f"revoked key {key_id}")


def ensure_demo_keys(url: str, data_dir: Path) -> tuple[dict[str, str], bool]:
    """The demo tenant's tokens by role, and whether they were minted just now.

    Tokens live in ``data_dir/demo-keys.json`` (mode 0600) so a restart does not
    mint new keys; the file is trusted only while its keys are live in this database.
    """
    path = data_dir / DEMO_KEYS_FILE
    saved = _read_demo_keys(path)

    async def check_or_mint(admin: Administration) -> dict[str, str] | None:
        keys = admin.keys
        if saved is not None and all(
            [await keys.authenticated(t, note_use=False) is not None for t in saved.values()]
        ):
            return None
        tokens: dict[str, str] = {}
        for role in DEMO_ROLES:
            _, issued = await keys.create(DEMO_TENANT, f"demo-{role}", [role])
            tokens[role] = issued.token
        return tokens

    minted = with_administration(url, check_or_mint)
    if minted is None:
        assert saved is not None
        return saved, False
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(minted, handle, indent=2)
    path.chmod(0o600)
    return minted, True


def _read_demo_keys(path: Path) -> dict[str, str] | None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and all(isinstance(data.get(role), str) for role in DEMO_ROLES):
            return {role: data[role] for role in DEMO_ROLES}
    return None

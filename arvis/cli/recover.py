"""``arvis recover``: one recovery sweep, and what it settled."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from arvis.cli.common import with_kernel
from arvis.cli.output import emit_json, table
from arvis.kernel import Kernel
from arvis.lifecycle.recovery import SettledIntent


def recover(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON for machines.")] = False,
) -> None:
    """Settle intents left by instances whose lease expired. Never runs a tool.

    A consumed capability is journaled EFFECT_STATE_UNKNOWN and its run flagged
    audit-incomplete; one never consumed is revoked and journaled EFFECT_NOT_STARTED.
    """

    async def sweep(kernel: Kernel) -> list[SettledIntent]:
        return await kernel.lifecycle.sweeper.sweep()

    settled = with_kernel(sweep)
    rows = [{**dataclasses.asdict(item), "boundary": item.boundary.value} for item in settled]
    if json_out:
        emit_json(rows)
        return
    columns = ["tenant_id", "run_id", "causal_id", "tool", "attempt", "boundary", "owner"]
    table(rows, columns, empty="nothing to recover: every intent of an expired instance is settled")
    if rows:
        typer.echo(f"settled {len(rows)} intent(s)")

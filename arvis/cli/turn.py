"""``arvis turn``: one governed agent turn.

The provider is asked once; each finalized decision becomes a ``tool.execute``
syscall through the one ``SyscallHandler``, with the provider's call id as its
causal id. Nothing the model says bypasses governance.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Annotated

import typer

from arvis.cli.common import JsonFlag, fail, settings_or_exit, with_kernel
from arvis.cli.output import emit_json, outcome_table
from arvis.config import Environment
from arvis.domain.decisions import ActionDecision
from arvis.domain.definitions import ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.kernel import Kernel, Lifecycle
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.providers.base import ModelProvider, ModelRequest, ModelTurn, Progress, TextDelta
from arvis.providers.turn import run_turn

OPERATOR_PRINCIPAL = "cli"


def operator_identity(tenant: str) -> Identity:
    """The local operator: a development identity, refused under ARVIS_ENV=production."""
    return Identity(
        tenant_id=TenantId(tenant),
        principal_id=PrincipalId(OPERATOR_PRINCIPAL),
        method="development",
        roles=("agent",),
    )


async def governed_turn(
    lifecycle: Lifecycle,
    provider: ModelProvider,
    request_for: Callable[[str, Sequence[ToolDefinition]], ModelRequest],
    *,
    prompt: str,
    run_id: str,
    identity: Identity,
    on_text: Callable[[str], None] | None = None,
) -> list[SyscallResult]:
    """Ask the model with the current plan's tools; govern each finalized decision in order."""
    definitions = list(lifecycle.plans.current.definitions.values())
    request = request_for(prompt, definitions)

    async def submit(causal_id: str, decision: ActionDecision) -> SyscallResult:
        syscall = Syscall(
            name="tool.execute", run_id=run_id, causal_id=causal_id, decision=decision
        )
        return await lifecycle.handler.handle(syscall, identity)

    def on_event(event: TextDelta | Progress | ModelTurn) -> None:
        if on_text is not None and isinstance(event, TextDelta):
            on_text(event.text)

    return await run_turn(provider, request, submit, on_event=on_event)


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

        provider = build_provider(kernel.file_config.provider, os.environ)
        config = load_provider_config(kernel.file_config.provider)
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

    results = with_kernel(use, admits=True)
    if json_out:
        emit_json([r.model_dump(mode="json") for r in results])
        return
    typer.echo("")
    outcome_table(results)

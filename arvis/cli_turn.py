"""One governed agent turn: the composition behind ``arvis turn``.

The provider is asked once; each finalized decision becomes a ``tool.execute``
syscall through the one ``SyscallHandler``, with the provider's call id as its
causal id. Nothing the model says bypasses governance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from arvis.bootstrap import Lifecycle
from arvis.domain.decisions import ActionDecision
from arvis.domain.definitions import ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.lifecycle.results import Syscall, SyscallResult
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

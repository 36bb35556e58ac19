"""Figure 2: the kernel, SyscallHandler with the echo tool, in-process and sequential."""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from arvis.bootstrap import Lifecycle, compose_lifecycle
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.lifecycle.evidence.witnessing import Witness
from arvis.lifecycle.policy.budgets import Budgets
from arvis.lifecycle.policy.policy import ToolPolicy
from arvis.lifecycle.recovery import RecoveryRuntime
from arvis.lifecycle.request import Syscall
from arvis.store.database import PgStore
from arvis.tools.builtins import builtin_tools

TENANT = "bench"
IDENTITY = Identity(
    tenant_id=TenantId(TENANT),
    principal_id=PrincipalId("bench"),
    method="api_key",
    key_id="k_bench",
    roles=("agent",),
)
RUN_LENGTH = 500  # a new run every this many syscalls, as a fleet of agents would


class BenchFailure(RuntimeError):
    """A syscall did not execute: the figure would be meaningless."""


@dataclass
class Kernel:
    store: PgStore
    lifecycle: Lifecycle
    prefix: str
    counter: itertools.count[int]

    async def syscall(self, run_id: str | None = None) -> None:
        n = next(self.counter)
        run = run_id or f"{self.prefix}-run-{n // RUN_LENGTH}"
        result = await self.lifecycle.handler.handle(
            Syscall(
                name="tool.execute",
                run_id=run,
                causal_id=f"c-{n}",
                decision={"tool": "echo", "payload": {"n": n, "text": "hello"}},  # type: ignore[arg-type]
            ),
            IDENTITY,
        )
        if result.outcome != "executed":
            raise BenchFailure(f"syscall {n}: {result.outcome} {result.reason} {result.problem}")

    async def timed(self, count: int) -> list[float]:
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            await self.syscall()
            samples.append(time.perf_counter() - start)
        return samples


@asynccontextmanager
async def open_kernel(
    url: str,
    prefix: str,
    *,
    policy: ToolPolicy | None = None,
    budgets: Budgets | None = None,
    witness: Witness | None = None,
) -> AsyncIterator[Kernel]:
    """The composition the tests use (compose_lifecycle) on a migrated database, with the
    default rules unless ``policy`` says otherwise, and no budgets or witness unless given."""
    store = await PgStore.open(url)
    try:
        lifecycle = compose_lifecycle(
            store=store,
            tools=builtin_tools(tempfile.mkdtemp(prefix="arvis-bench-sandbox-")),
            policy=policy,
            budgets=budgets,
            witness=witness,
        )
        # Like every admitting process, the kernel holds a lease and beats it (DESIGN §6).
        runtime = RecoveryRuntime(lifecycle.lease, lifecycle.sweeper, sweep_interval_s=3600)
        await runtime.start()
        try:
            yield Kernel(store, lifecycle, prefix, itertools.count())
        finally:
            await lifecycle.handler.drain()
            await runtime.stop()
    finally:
        await store.close()

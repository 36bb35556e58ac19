"""The real lifecycle over the in-memory store: SyscallHandler, authorization, admission,
the dispatcher, settlement, recovery, consent and quorum approval, resolution and replay,
wired as :func:`arvis.bootstrap.compose_lifecycle` wires them, with every adapter a fake
(the store, the plan store, the checkpoint flags). A rule test on it runs in
milliseconds; what only PostgreSQL can show stays in tests/integration.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from arvis.bootstrap import DEFAULT_CONFIRMATION_TTL
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, InstanceId
from arvis.kernel import Lifecycle
from arvis.lifecycle.admission import AdmissionService
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.consent.reconcile import Reconciler, ReconcileSettings
from arvis.lifecycle.consent.resolution import ResolutionService
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.effects import EffectDispatcher
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.policy.budget_report import BudgetReports
from arvis.lifecycle.policy.budgets import BudgetConfig, Budgets
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy, ToolPolicy
from arvis.lifecycle.ports import AuditSink
from arvis.lifecycle.receipts import IntentOutboxService
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.lifecycle.replay import ReplayService
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.lifecycle.settlement import Settlement
from arvis.lifecycle.syscalls import SyscallHandler
from arvis.tools.base import Tool
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import StaticToolPlanSource
from tests.support.fakes import InMemoryPlanStore
from tests.support.fakestore import FakeLifecycleStore
from tests.support.lifecycle import AGENT, APPROVER, ScriptedTool, standard_tools

# A fixed start: the store's clock is the test's clock, so nothing depends on today.
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


class HandClock:
    """The one clock of a fake composition (the process's and the database's)."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.moment = start

    def now(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


_ids = itertools.count(1)


@dataclass
class FakeHarness:
    """A wired lifecycle over :class:`FakeLifecycleStore`, with counting tools."""

    store: FakeLifecycleStore
    lifecycle: Lifecycle
    tools: dict[str, ScriptedTool]
    clock: HandClock
    run_id: str = field(default_factory=lambda: f"run-{next(_ids)}")

    @property
    def handler(self) -> SyscallHandler:
        return self.lifecycle.handler

    async def execute(
        self,
        tool: str,
        payload: dict[str, Any] | None = None,
        *,
        causal_id: str | None = None,
        run_id: str | None = None,
        identity: Identity = AGENT,
    ) -> SyscallResult:
        syscall = Syscall(
            name="tool.execute",
            run_id=run_id or self.run_id,
            causal_id=causal_id or f"c-{next(_ids)}",
            decision={"tool": tool, "payload": payload if payload is not None else {}},
        )
        return await self.lifecycle.handler.handle(syscall, identity)

    async def approve(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.consent.approve(approver, ConfirmationId(confirmation_id))

    async def deny(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.consent.deny(approver, ConfirmationId(confirmation_id), "no")

    def in_flight(self, run_id: str | None = None) -> list[str]:
        """Causal ids of the run's attempts admitted and not yet journaled."""
        run = run_id or self.run_id
        return sorted(a.causal_id for a in self.store.tables.attempts.values() if a.run_id == run)

    def entries(self, run_id: str | None = None) -> list[Any]:
        run = run_id or self.run_id
        return [
            stored.entry
            for (_, r, _), stored in sorted(self.store.tables.entries.items())
            if r == run
        ]

    def capability_states(self, key: str) -> list[str]:
        """The state of each capability minted for ``key``, by attempt: every one on
        record is CONSUMED (its settling entry, or its attempt still in flight)."""
        tables = self.store.tables
        settled = [
            e.entry.attempt or 0
            for e in tables.entries.values()
            if e.entry.idempotency_key == key and e.entry.kind in ("execution", "recovery")
        ]
        in_flight = [a.attempt for a in tables.attempts.values() if a.idempotency_key == key]
        return ["CONSUMED" for _ in sorted([*settled, *in_flight])]

    def confirmation_state(self, confirmation_id: str) -> str:
        for (_, cid), row in self.store.tables.confirmations.items():
            if cid == confirmation_id:
                return row.state
        raise KeyError(confirmation_id)

    async def close(self) -> None:
        handler = self.lifecycle.handler
        handler.stop_admitting()
        await handler.drain(1.0)
        for late in list(handler.settlement._late):
            late.cancel()
            with contextlib.suppress(BaseException):
                await late
        with contextlib.suppress(Exception):
            await self.lifecycle.lease.release()


def compose_fake_lifecycle(
    *,
    store: FakeLifecycleStore,
    tools: Sequence[Tool],
    clock: HandClock,
    instance_id: str,
    policy: ToolPolicy | None = None,
    audit_sink: AuditSink | None = None,
    tool_timeout_s: float = 5.0,
    allow_self_approval: bool = False,
    lease_ttl_s: float = 300.0,
    budgets: Sequence[BudgetConfig] = (),
    reconcile: ReconcileSettings | None = None,
) -> Lifecycle:
    """:func:`arvis.bootstrap.compose_lifecycle`'s wiring on fakes (keep the two alike)."""
    ttl_s = DEFAULT_CONFIRMATION_TTL.total_seconds()
    policy = policy or RulePolicy()
    charged = Budgets(budgets)
    dispatcher = ToolDispatcher(tools, default_deadline_s=tool_timeout_s)
    plans = StaticToolPlanSource(dispatcher, store=InMemoryPlanStore())
    lease = InstanceLease(store, InstanceId(instance_id), lease_ttl_s)
    resolutions = ResolutionService(
        store, clock, allow_self_resolution=allow_self_approval, confirmation_ttl_s=ttl_s
    )
    reconciler = Reconciler(store, plans, resolutions, reconcile or ReconcileSettings())
    sweeper = RecoverySweeper(store, clock, reconciler=reconciler)
    evidence = EvidenceService(store, clock, flags=store)
    admission = AdmissionService(
        store=store,
        plans=plans,
        authorization=ToolAuthorizationService(policy, clock, charged),
        outbox=IntentOutboxService(audit_sink, store.fingerprint, None),
        clock=clock,
        confirmation_ttl_s=ttl_s,
        evidence=evidence,
    )
    handler = SyscallHandler(
        admission=admission,
        effects=EffectDispatcher(tool_timeout_s, store.mark_started),
        settlement=Settlement(store=store, clock=clock, attempts=5, sweeper=sweeper),
        lease=lease,
        clock=clock,
    )
    return Lifecycle(
        plans=plans,
        handler=handler,
        consent=ConsentService(store, clock, allow_self_approval=allow_self_approval),
        replay=ReplayService(store, evidence),
        evidence=evidence,
        policy=policy,
        lease=lease,
        sweeper=sweeper,
        resolutions=resolutions,
        reconciler=reconciler,
        budgets=BudgetReports(store, charged, clock),
    )


async def make_fake_harness(
    *,
    store: FakeLifecycleStore | None = None,
    tools: dict[str, ScriptedTool] | None = None,
    extra_tools: Sequence[Tool] = (),
    policy: PolicyConfig | None = None,
    tool_policy: ToolPolicy | None = None,
    clock: HandClock | None = None,
    instance_id: str = "test-instance",
    claim_lease: bool = True,
    **options: Any,
) -> FakeHarness:
    """A lifecycle over ``store`` (a new one by default; pass another harness's store and
    clock to stand for a second process on the same database)."""
    clock = clock or HandClock()
    store = store or FakeLifecycleStore(clock)
    tools = standard_tools() if tools is None else tools
    lifecycle = compose_fake_lifecycle(
        store=store,
        tools=[*tools.values(), *extra_tools],
        clock=clock,
        instance_id=instance_id,
        policy=tool_policy or RulePolicy(policy or PolicyConfig()),
        **options,
    )
    if claim_lease:
        await lifecycle.lease.claim()
    return FakeHarness(store=store, lifecycle=lifecycle, tools=tools, clock=clock)


async def crash_during_dispatch(
    harness: FakeHarness,
    tool: str,
    payload: dict[str, Any],
    *,
    causal_id: str,
    report_start: bool = False,
    identity: Identity = AGENT,
) -> str:
    """Admit a call in a second process on the same store, let its tool block (after
    reporting its start, if asked), then kill that process: it never writes again and
    its lease lapses. Answers the idempotency key of the abandoned attempt."""
    running = harness.tools[tool].then_block(report_start=report_start)
    doomed = await make_fake_harness(
        store=harness.store.opened_again(),
        tools=harness.tools,
        clock=harness.clock,
        tool_policy=harness.lifecycle.policy,
        instance_id=f"doomed-{next(_ids)}",
    )
    task = asyncio.create_task(
        doomed.execute(tool, payload, causal_id=causal_id, run_id=harness.run_id, identity=identity)
    )
    waiter = asyncio.create_task(running.wait())
    await asyncio.wait({task, waiter}, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
    if not running.is_set():
        waiter.cancel()
        await doomed.close()
        raise AssertionError(f"the call never reached its tool: {await task}")
    # The process dies (kill -9): it never reaches the database again, its lease lapses.
    # Its settlement tries once, not five times with backoff: nothing it does can land.
    doomed.store.outage = True
    doomed.handler.settlement.attempts = 1
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    for late in list(doomed.handler.settlement._late):
        late.cancel()
        with contextlib.suppress(BaseException):
            await late
    harness.store.expire_lease(doomed.lifecycle.lease.name)
    for attempt in harness.store.tables.attempts.values():
        if attempt.run_id == harness.run_id and attempt.causal_id == causal_id:
            return attempt.idempotency_key
    raise AssertionError("the call never reached its tool")

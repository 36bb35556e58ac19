"""Lifecycle compositions for tests: the real SyscallHandler on a real store."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from arvis.bootstrap import compose_lifecycle
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import ConfirmationId, InstanceId, PrincipalId, TenantId
from arvis.kernel import Lifecycle
from arvis.lifecycle.policy.budgets import BudgetConfig, Budgets
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy, ToolPolicy
from arvis.lifecycle.ports import AuditSink, LifecycleStore
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.lifecycle.syscalls import SyscallTracer
from arvis.store.database import PgStore
from arvis.store.engine import libpq_url
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from tests.support.fakes import FakeTool

AGENT = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("agent-7"),
    method="api_key",
    key_id="k_agent",
    roles=("agent",),
)
APPROVER = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("ops-lead"),
    method="api_key",
    key_id="k_ops",
    roles=("approver",),
)


CLOCK_START = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
"""Where a harness's hand clock starts: a fixed moment, nowhere near the wall clock.
Consent expiry is judged by the database's clock alone (issue 24), so the process's
clock may say anything; :meth:`Harness.let_time_pass` moves both."""


class FakeClock:
    """A clock the test moves by hand, starting at :data:`CLOCK_START` (or ``start``)."""

    def __init__(self, start: datetime = CLOCK_START) -> None:
        self.moment = start

    def now(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


def tool_definition(
    name: str,
    *,
    effect: Effect = Effect.MUTATING,
    replay_safety: ReplaySafety = ReplaySafety.IDEMPOTENT,
    capabilities: Sequence[str] = (),
    schema: dict[str, Any] | None = None,
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name}, a tool for lifecycle tests",
        input_schema=schema or {"type": "object"},
        effect=effect,
        replay_safety=replay_safety,
        capabilities=capabilities,
    )


Behaviour = Callable[[ToolInvocation], Awaitable[ToolResult]]


class ScriptedTool(FakeTool):
    """A tool that counts its runs and does what its current script says.

    The script is a queue of behaviours; when it is empty the tool echoes its payload.
    A behaviour reaches the call's reporter through :attr:`reporter`.
    """

    def __init__(self, definition: ToolDefinition) -> None:
        self.script: list[Behaviour] = []
        self.seen: list[Any] = []
        self.reporter: Reporter | None = None
        super().__init__(definition, self._run)

    async def _run(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        self.seen.append(invocation.payload.value)
        self.reporter = reporter
        if self.script:
            return await self.script.pop(0)(invocation)
        await reporter.effect_started(invocation.call_id)
        return ToolResult.ok({"echo": invocation.payload.value})

    def then_block(self, *, report_start: bool = False) -> asyncio.Event:
        """Next run blocks for ever (after reporting its start, if asked); the
        returned event is set once the body is running."""
        running = asyncio.Event()

        async def block(invocation: ToolInvocation) -> ToolResult:
            if report_start:
                assert self.reporter is not None
                await self.reporter.effect_started(invocation.call_id)
            running.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        self.script.append(block)
        return running

    def then_sleep(self, seconds: float) -> asyncio.Event:
        """Next run reports its start, sleeps, then completes; the event is set once
        the body is running."""
        running = asyncio.Event()

        async def slow(invocation: ToolInvocation) -> ToolResult:
            assert self.reporter is not None
            await self.reporter.effect_started(invocation.call_id)
            running.set()
            await asyncio.sleep(seconds)
            return ToolResult.ok({"slept": seconds})

        self.script.append(slow)
        return running

    def then_fail(self, *, effect_started: bool | None, retryable: bool) -> None:
        async def fail(invocation: ToolInvocation) -> ToolResult:
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=effect_started,
                retryable=retryable,
                code="scripted_failure",
                message="the scripted failure",
            )

        self.script.append(fail)

    def then(self, behaviour: Behaviour) -> None:
        self.script.append(behaviour)


def standard_tools() -> dict[str, ScriptedTool]:
    """One tool of each kind the retry table distinguishes."""
    return {
        "read": ScriptedTool(
            tool_definition("read", effect=Effect.READ_ONLY, replay_safety=ReplaySafety.SAFE)
        ),
        "write": ScriptedTool(
            tool_definition(
                "write",
                replay_safety=ReplaySafety.IDEMPOTENT,
                schema={
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            )
        ),
        "append": ScriptedTool(tool_definition("append", replay_safety=ReplaySafety.UNSAFE)),
        "fetch": ScriptedTool(
            tool_definition(
                "fetch",
                replay_safety=ReplaySafety.IDEMPOTENT,
                capabilities=["network.access"],
            )
        ),
        "shell": ScriptedTool(
            tool_definition(
                "shell", replay_safety=ReplaySafety.UNSAFE, capabilities=["process.execute"]
            )
        ),
    }


_causal = itertools.count(1)


@dataclass
class Harness:
    """A wired lifecycle over a real store, with counting tools and a hand clock.

    Like every admitting process it holds a lease (claimed by :func:`make_harness`).
    """

    store: PgStore
    lifecycle: Lifecycle
    tools: dict[str, ScriptedTool]
    clock: FakeClock
    url: str
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    tool_policy: ToolPolicy | None = None
    budgets: Sequence[BudgetConfig] = ()
    run_id: str = field(default_factory=lambda: f"run-{next(_causal)}")
    _cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def close(self) -> None:
        """Undo what the test left (crashed processes first), release the lease,
        close the store."""
        for cleanup in reversed(self._cleanups):
            await cleanup()
        self._cleanups.clear()
        handler = self.lifecycle.handler
        handler.stop_admitting()
        await handler.drain(5.0)
        with contextlib.suppress(Exception):
            await self.lifecycle.lease.release()
        await self.store.close()

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
            causal_id=causal_id or f"c-{next(_causal)}",
            decision={"tool": tool, "payload": payload if payload is not None else {}},  # type: ignore[arg-type]
        )
        return await self.lifecycle.handler.handle(syscall, identity)

    async def approve(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.consent.approve(approver, ConfirmationId(confirmation_id))

    async def deny(self, confirmation_id: str, approver: Identity = APPROVER) -> None:
        await self.lifecycle.consent.deny(approver, ConfirmationId(confirmation_id), "no")

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read (or, for tamper tests, write) the database directly."""
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def let_time_pass(self, **delta: float) -> None:
        """``delta`` passes: the hand clock moves on, and so, for every consent of the
        database, does the database's clock (their times move back by ``delta``, which
        is what its clock moving on would do to them: expiry is judged by it)."""
        self.clock.advance(**delta)
        # Row by row with the times computed here: Citus refuses timestamptz arithmetic
        # on a column in an UPDATE over a distributed table's shards.
        back = timedelta(**delta)
        for tenant, confirmation, *times in self.sql(
            "SELECT tenant_id, confirmation_id, expires_at, created_at, renewed_at"
            " FROM confirmations"
        ):
            self.sql(
                "UPDATE confirmations SET expires_at = %s, created_at = %s, renewed_at = %s"
                " WHERE tenant_id = %s AND confirmation_id = %s",
                *[None if at is None else at - back for at in times],
                tenant,
                confirmation,
            )

    def expire_lease(self) -> None:
        """Make this harness's lease expired in the database, as if its ttl passed
        without a heartbeat (the process is gone or cut off)."""
        self.sql(
            "UPDATE instance_leases SET expires_at = now() WHERE instance_id = %s",
            self.lifecycle.lease.name,
        )

    def capability_states(self, key: str) -> list[str]:
        """The state of each capability minted for ``key``, by attempt.

        A capability is minted, activated and consumed in its admission, so every
        one on record is CONSUMED: the journal entry that settled its attempt, or
        the attempt row still in flight, is that record (revision 0005).
        """
        settled = self.sql(
            "SELECT attempt FROM journal_entries WHERE idempotency_key = %s"
            " AND kind IN ('execution', 'recovery')",
            key,
        )
        in_flight = self.sql("SELECT attempt FROM attempts WHERE idempotency_key = %s", key)
        return ["CONSUMED" for _ in sorted([*settled, *in_flight])]

    def in_flight(self, run_id: str | None = None) -> list[str]:
        """Causal ids of the run's attempts that are admitted and not yet journaled."""
        rows = self.sql(
            "SELECT causal_id FROM attempts WHERE run_id = %s ORDER BY causal_id",
            run_id or self.run_id,
        )
        return [row[0] for row in rows]

    def confirmation_state(self, confirmation_id: str) -> str:
        return str(
            self.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", confirmation_id)[
                0
            ][0]
        )


async def make_harness(
    database_url: str,
    *,
    tools: dict[str, ScriptedTool] | None = None,
    extra_tools: Sequence[Tool] = (),
    policy: PolicyConfig | None = None,
    audit_sink: Callable[[str], AuditSink] | None = None,
    instance_id: str = "test-instance",
    tool_timeout_s: float = 5.0,
    production: bool = False,
    allow_self_approval: bool = False,
    lease_ttl_s: float = 300.0,
    claim_lease: bool = True,
    wrap_store: Callable[[LifecycleStore], LifecycleStore] | None = None,
    clock: FakeClock | None = None,
    tracer: SyscallTracer | None = None,
    tool_policy: ToolPolicy | None = None,
    budgets: Sequence[BudgetConfig] = (),
) -> Harness:
    """A lifecycle over ``database_url``; ``clock`` is shared with another harness
    when both stand for processes on one machine; ``tracer`` traces its syscalls.
    ``tool_policy`` replaces the rule policy of ``policy`` (a Cedar or shadow policy);
    ``budgets`` are charged."""
    store = await PgStore.open(database_url)
    clock = clock or FakeClock()
    tools = standard_tools() if tools is None else tools
    policy = policy or PolicyConfig()
    lifecycle = compose_lifecycle(
        store=store,
        tools=[*tools.values(), *extra_tools],
        policy=tool_policy or RulePolicy(policy),
        clock=clock,
        instance_id=InstanceId(instance_id),
        audit_sink=None if audit_sink is None else audit_sink(store.fingerprint),
        tool_timeout_s=tool_timeout_s,
        allow_self_approval=allow_self_approval,
        lease_ttl_s=lease_ttl_s,
        production=production,
        lifecycle_store=None if wrap_store is None else wrap_store(store.ops),
        tracer=tracer,
        budgets=Budgets(budgets),
    )
    assert make_url(database_url).database
    if claim_lease:
        await lifecycle.lease.claim()
    return Harness(
        store=store,
        lifecycle=lifecycle,
        tools=tools,
        clock=clock,
        url=database_url,
        policy=policy,
        tool_policy=tool_policy,
        budgets=budgets,
    )


_doomed = itertools.count(1)


async def attempt_then_crash(
    harness: Harness,
    tool: str,
    payload: dict[str, Any],
    *,
    causal_id: str,
    running: asyncio.Event,
    identity: Identity = AGENT,
) -> SyscallResult | None:
    """Post a syscall from a second process on the same database, tools and run.

    If the syscall ends without reaching the tool body (refused, deduplicated,
    consent asked, or :class:`AttemptInFlight` raised), that answer is returned
    and the process stops cleanly. If the body starts (``running`` is set; the
    caller scripted a body that sets it and then blocks), the process is killed
    as ``kill -9`` would kill it: it never writes again and its lease lapses;
    None is returned and the abandoned intent is left for recovery.
    """
    doomed = await make_harness(
        harness.url,
        tools=harness.tools,
        policy=harness.policy,
        instance_id=f"doomed-{next(_doomed)}",
        clock=harness.clock,
        tool_policy=harness.tool_policy,
        budgets=harness.budgets,
    )
    task = asyncio.create_task(
        doomed.execute(tool, payload, causal_id=causal_id, run_id=harness.run_id, identity=identity)
    )
    waiter = asyncio.create_task(running.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if not running.is_set():
        waiter.cancel()
        try:
            return await task
        finally:
            await doomed.close()
    doomed.expire_lease()
    await doomed.store.close()

    async def bury() -> None:
        # The dead process's last task: it can no longer reach the database.
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        for late in list(doomed.lifecycle.handler.settlement._late):
            late.cancel()
            with contextlib.suppress(BaseException):
                await late

    harness._cleanups.append(bury)
    return None


async def crash_during_dispatch(
    harness: Harness,
    tool: str,
    payload: dict[str, Any],
    *,
    causal_id: str,
    report_start: bool = False,
    identity: Identity = AGENT,
) -> str:
    """Admit a call in a second process, let its tool block (after reporting its
    start, if asked), then kill that process (see :func:`attempt_then_crash`).
    Answers the idempotency key of the abandoned attempt."""
    running = harness.tools[tool].then_block(report_start=report_start)
    answer = await attempt_then_crash(
        harness, tool, payload, causal_id=causal_id, running=running, identity=identity
    )
    assert answer is None, f"the call never reached its tool: {answer}"
    key = harness.sql(
        "SELECT idempotency_key FROM attempts WHERE run_id = %s AND causal_id = %s",
        harness.run_id,
        causal_id,
    )
    return str(key[0][0])

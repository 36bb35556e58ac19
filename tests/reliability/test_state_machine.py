"""Scenario 5: a hypothesis state machine over syscalls, consent, crashes and recoveries.

After every step the DESIGN §4 table is checked against what the lifecycle
answered, and the invariants against the database: an unsafe effect never runs
again once it may have happened, every capability is consumed at most once,
nothing is left unsettled except abandoned attempts not yet recovered, consent
states follow DESIGN §2, and the run's chain verifies.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from arvis.domain.ids import RunId
from arvis.lifecycle.errors import AttemptInFlight
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.tools.base import ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from tests.support.lifecycle import AGENT, Harness, make_harness
from tests.support.reliability import report, size
from tests.support.statemachine import KeyModel

pytestmark = [pytest.mark.db, pytest.mark.reliability]

EXAMPLES = size(ci=10, full=100)
STEPS = size(ci=30, full=50)

# One decision per causal id, for ever: (tool, payload).
DECISIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "a1": ("append", {"line": "a1"}),
    "a2": ("append", {"line": "a2"}),
    "w1": ("write", {"text": "w1"}),
    "w2": ("write", {"text": "w2"}),
    "r1": ("read", {"q": "r1"}),
}
# What the tool body does when it runs: (effect_started, retryable) of a failure, or None.
BEHAVIOURS: dict[str, tuple[bool | None, bool] | None] = {
    "ok": None,
    "fails_before_effect": (False, False),
    "fails_after_effect": (True, False),
    "fails_unknown": (None, False),
    "fails_retry_advised": (False, True),
}
STATS: Counter[str] = Counter()


def _behaviour(kind: str, tool: str) -> Any:
    failure = BEHAVIOURS[kind]
    # Contracts the dispatcher enforces: a read-only tool cannot be uncertain,
    # an unsafe one cannot advise retry.
    if tool == "read" or (tool == "append" and failure is not None and failure[1]):
        failure = None

    async def body(invocation: ToolInvocation) -> ToolResult:
        if failure is None:
            return ToolResult.ok({"echo": invocation.payload.value})
        raise ToolExecutionError(
            invocation.call_id,
            effect_started=failure[0],
            retryable=failure[1],
            code="scripted",
            message="scripted failure",
        )

    return body


class LifecycleMachine(RuleBasedStateMachine):
    database_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.harness: Harness = self.loop.run_until_complete(make_harness(self.database_url))
        self.keys = {
            causal: KeyModel(causal, tool, unsafe=tool == "append", needs_consent=tool == "append")
            for causal, (tool, _) in DECISIONS.items()
        }
        self.runs: Counter[str] = Counter()  # tool runs per causal id
        self.journal_length = 0
        self.flagged = False
        self.sealed_at: dict[str, int] = {}
        for tool in self.harness.tools.values():
            tool.script.clear()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        self.run(self.harness.store.close())
        self.loop.close()

    # -- steps -------------------------------------------------------------

    def _count_run(self, causal: str) -> None:
        self.runs[causal] += 1

    def _script(self, causal: str, body: Any) -> None:
        tool = self.harness.tools[self.keys[causal].tool]

        async def counted(invocation: ToolInvocation) -> ToolResult:
            self._count_run(causal)
            result: ToolResult = await body(invocation)
            return result

        tool.script[:] = [counted]

    def _apply(self, model: KeyModel, result: Any) -> None:
        """Check one answer against the model's prediction, then learn from it."""
        expected, reason = model.expect()
        STATS[expected] += 1
        assert result.outcome == expected, (model, result)
        if reason is not None:
            assert result.reason == reason, (model, result)
        if result.outcome == "executed":
            problem = result.problem or {}
            model.executed(str(result.boundary.value), bool(problem.get("retryable", False)))
            self.journal_length += 1
        elif result.outcome == "refused":
            if result.reason == "confirmation_denied":  # a refusal that is an attempt
                model.last_boundary, model.last_retryable = "PRE_EFFECT_REFUSAL", False
            self.journal_length += 1
        elif result.outcome == "confirmation_required":
            model.confirmation_id = result.confirmation.id
            model.confirmation_state = "PENDING"

    @rule(causal=st.sampled_from(sorted(DECISIONS)), kind=st.sampled_from(sorted(BEHAVIOURS)))
    def syscall(self, causal: str, kind: str) -> None:
        model = self.keys[causal]
        tool, payload = DECISIONS[causal]
        self._script(causal, _behaviour(kind, tool))
        try:
            result = self.run(self.harness.execute(tool, payload, causal_id=causal))
        except AttemptInFlight:
            assert model.expect()[0] == "in_flight", model
            STATS["in_flight"] += 1
            return
        finally:
            self.harness.tools[tool].script.clear()
        self._apply(model, result)

    @rule(causal=st.sampled_from(sorted(DECISIONS)))
    def crash_during_dispatch(self, causal: str) -> None:
        """Abandon the dispatch while the tool blocks, as a dying instance would."""
        model = self.keys[causal]
        tool, payload = DECISIONS[causal]
        started = asyncio.Event()

        async def hang(invocation: ToolInvocation) -> ToolResult:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        self._script(causal, hang)

        async def attempt() -> Any:
            task = asyncio.create_task(self.harness.execute(tool, payload, causal_id=causal))
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if started.is_set():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return None
            waiter.cancel()
            return await task

        try:
            result = self.run(attempt())
        except AttemptInFlight:
            assert model.expect()[0] == "in_flight", model
            return
        finally:
            self.harness.tools[tool].script.clear()
        if result is not None:
            self._apply(model, result)
            return
        assert model.expect()[0] == "executed", model
        STATS["crash"] += 1
        model.dispatched += 1
        model.in_flight = True
        if model.unsafe:
            model.sealed = True
        if model.confirmation_state == "APPROVED":
            model.confirmation_state = "RESERVED"

    @rule()
    def recover(self) -> None:
        settled = self.run(RecoverySweeper(self.harness.store, self.harness.clock).sweep())
        recovered = {item.causal_id for item in settled if item.run_id == self.harness.run_id}
        assert recovered == {c for c, m in self.keys.items() if m.in_flight}
        for causal in recovered:
            model = self.keys[causal]
            model.in_flight = False
            model.settled("EFFECT_STATE_UNKNOWN", False)
            self.journal_length += 1
            self.flagged = True
        STATS["recovered"] += len(recovered)

    @rule(causal=st.sampled_from(["a1", "a2"]))
    def approve(self, causal: str) -> None:
        model = self.keys[causal]
        if model.confirmation_state != "PENDING":
            return
        assert model.confirmation_id is not None
        self.run(self.harness.approve(model.confirmation_id))
        model.confirmation_state = "APPROVED"
        STATS["approved"] += 1

    @rule(causal=st.sampled_from(["a1", "a2"]))
    def deny(self, causal: str) -> None:
        model = self.keys[causal]
        if model.confirmation_state not in ("PENDING", "APPROVED"):
            return
        assert model.confirmation_id is not None
        self.run(self.harness.deny(model.confirmation_id))
        model.confirmation_state = "DENIED"
        STATS["denied"] += 1

    # -- invariants ----------------------------------------------------------

    @invariant()
    def an_unsafe_effect_never_runs_again_once_it_may_have_happened(self) -> None:
        for causal, model in self.keys.items():
            assert self.runs[causal] <= model.dispatched
            if model.sealed:
                runs_then = self.sealed_at.setdefault(causal, self.runs[causal])
                assert self.runs[causal] == runs_then, (causal, model)

    @invariant()
    def the_store_agrees_with_the_model(self) -> None:
        h = self.harness
        run = h.run_id
        unsettled = h.sql("SELECT causal_id FROM intents WHERE run_id = %s AND NOT settled", run)
        assert {c for (c,) in unsettled} == {c for c, m in self.keys.items() if m.in_flight}
        consumed = Counter(
            c
            for (c,) in h.sql(
                "SELECT i.causal_id FROM capabilities c"
                " JOIN intents i USING (tenant_id, capability_id)"
                " WHERE i.run_id = %s AND c.state = 'CONSUMED'",
                run,
            )
        )
        live = h.sql(
            "SELECT count(*) FROM capabilities c JOIN intents i USING (tenant_id, capability_id)"
            " WHERE i.run_id = %s AND c.state IN ('MINTED', 'ACTIVE')",
            run,
        )
        assert live == [(0,)]
        for causal, model in self.keys.items():
            assert consumed[causal] == model.dispatched, (causal, model, consumed)
            if model.confirmation_id is not None:
                assert h.confirmation_state(model.confirmation_id) == model.confirmation_state
        rows = h.sql("SELECT journal_length, audit_incomplete FROM runs WHERE run_id = %s", run)
        if rows:
            assert rows[0] == (self.journal_length, self.flagged)
            report_ = self.run(h.lifecycle.replay.verify(AGENT.tenant_id, RunId(run)))
            assert report_.ok, report_


def test_the_retry_table_and_the_invariants_hold_after_every_step(database_url: str) -> None:
    LifecycleMachine.database_url = database_url
    STATS.clear()
    run_state_machine_as_test(
        LifecycleMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    steps = sum(STATS.values())
    report(
        f"state-machine: {EXAMPLES} runs of up to {STEPS} steps, {steps} checked answers"
        f" ({STATS['executed']} executed, {STATS['deduplicated']} deduplicated,"
        f" {STATS['refused']} refused, {STATS['confirmation_required']} consent asked,"
        f" {STATS['in_flight']} in flight, {STATS['crash']} crashes,"
        f" {STATS['recovered']} recovered,"
        f" {STATS['approved']} approvals, {STATS['denied']} denials), 0 violations"
    )
    assert STATS["crash"] > 0
    assert STATS["recovered"] > 0

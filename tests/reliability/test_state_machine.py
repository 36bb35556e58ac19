"""Scenario 5: a hypothesis state machine over syscalls, consent, crashes and recoveries.

Steps: syscalls by two principals through two workers (two processes on one
database), tools that complete, fail before or after the effect, fail
uncertainly or advise retry; approvals and denials by two approvers, one of
whom also asks for consent (self-approval is refused); crashes of a third
process while its tool blocks, with or without a start report; recovery
sweeps. After every step the DESIGN §4 table is checked against what the
lifecycle answered, and the invariants against the database: an unsafe effect
never runs again once it may have happened, every capability is consumed at
most once, nothing is left unsettled except abandoned attempts not yet
recovered, consent states follow DESIGN §2 and stay bound to their requester,
the run is its first caller's (the other principal's posts are refused and
write nothing, DESIGN §10), and the run's chain verifies.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, RunId
from arvis.lifecycle.errors import AttemptInFlight, RunOfAnotherPrincipal, SelfApproval
from arvis.tools.base import ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from tests.support.lifecycle import AGENT, APPROVER, Harness, attempt_then_crash, make_harness
from tests.support.reliability import FULL, report, size
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
# A second principal of the tenant whose key also holds the approver role.
DUAL = AGENT.model_copy(
    update={
        "principal_id": PrincipalId("agent-8"),
        "key_id": "k_dual",
        "roles": ("agent", "approver"),
    }
)
CALLERS: dict[str, Identity] = {"agent": AGENT, "dual": DUAL}
# Who posts: the principal that owns the run, mostly; now and then the other one.
WHO = ["owner", "owner", "owner", "stranger"]
APPROVERS: dict[str, Identity] = {"approver": APPROVER, "dual": DUAL}


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
        # A second worker: another process (its own lease) on the same database and tools.
        self.second: Harness = self.loop.run_until_complete(
            make_harness(self.database_url, tools=self.harness.tools, instance_id="sm-worker-2")
        )
        self.keys = {
            causal: KeyModel(causal, tool, unsafe=tool == "append", needs_consent=tool == "append")
            for causal, (tool, _) in DECISIONS.items()
        }
        self.runs: Counter[str] = Counter()  # tool runs per causal id
        self.journal_length = 0
        self.flagged = False
        self.owner: Identity = AGENT
        """The principal the run is bound to (DESIGN §10): the caller of most posts."""
        self.stranger: Identity = DUAL
        self.sealed_at: dict[str, int] = {}
        for tool in self.harness.tools.values():
            tool.script.clear()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        self.run(self.second.close())
        self.run(self.harness.close())
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

    def _apply(self, model: KeyModel, result: Any, caller: Identity) -> None:
        """Check one answer against the model's prediction, then learn from it."""
        expected, reason = model.expect(caller.principal_id)
        STATS[expected] += 1
        assert result.outcome == expected, (model, caller.principal_id, result)
        if reason is not None:
            assert result.reason == reason, (model, result)
        if result.outcome == "executed":
            problem = result.problem or {}
            model.executed(str(result.boundary.value), bool(problem.get("retryable", False)))
            self.journal_length += 1
        elif result.outcome == "refused":
            if result.reason == "confirmation_denied":  # a refusal that is an attempt
                model.last_boundary, model.last_retryable = "PRE_EFFECT_REFUSAL", False
            if result.reason == "identity_mismatch":
                STATS["identity_mismatch"] += 1
                assert result.confirmation is None
            self.journal_length += 1
        elif result.outcome == "confirmation_required":
            model.confirmation_id = result.confirmation.id
            model.confirmation_state = "PENDING"
            model.requester = caller.principal_id

    def _expect_in_flight(self, model: KeyModel, caller: Identity) -> None:
        assert model.expect(caller.principal_id)[0] == "in_flight", model
        STATS["in_flight"] += 1

    @initialize(owner=st.sampled_from(sorted(CALLERS)))
    def open_the_run(self, owner: str) -> None:
        """Which principal opens the run, and so owns it: posts by the other are refused
        identity_mismatch and write nothing (DESIGN §10)."""
        self.owner = CALLERS[owner]
        self.stranger = next(c for c in CALLERS.values() if c is not self.owner)
        opened = self.run(
            self.harness.execute(
                "read",
                {"q": "open"},
                causal_id="open",
                run_id=self.harness.run_id,
                identity=self.owner,
            )
        )
        assert opened.outcome == "executed", opened
        self.journal_length += 1

    def _caller(self, who: str) -> Identity:
        return self.owner if who == "owner" else self.stranger

    def _refused_as_foreign(self, caller: Identity) -> None:
        assert caller is self.stranger, "the run's own principal was refused identity_mismatch"
        STATS["identity_mismatch"] += 1

    @rule(
        causal=st.sampled_from(sorted(DECISIONS)),
        kind=st.sampled_from(sorted(BEHAVIOURS)),
        who=st.sampled_from(WHO),
        worker=st.sampled_from([0, 1]),
    )
    def syscall(self, causal: str, kind: str, who: str, worker: int) -> None:
        model = self.keys[causal]
        caller = self._caller(who)
        tool, payload = DECISIONS[causal]
        self._script(causal, _behaviour(kind, tool))
        process = (self.harness, self.second)[worker]
        try:
            result = self.run(
                process.execute(
                    tool, payload, causal_id=causal, run_id=self.harness.run_id, identity=caller
                )
            )
        except RunOfAnotherPrincipal:
            self._refused_as_foreign(caller)
            return
        except AttemptInFlight:
            self._expect_in_flight(model, caller)
            return
        finally:
            self.harness.tools[tool].script.clear()
        assert caller is self.owner, (caller.principal_id, result)
        self._apply(model, result, caller)

    @rule(
        causal=st.sampled_from(sorted(DECISIONS)),
        report_start=st.booleans(),
        who=st.sampled_from(WHO),
    )
    def crash_during_dispatch(self, causal: str, report_start: bool, who: str) -> None:
        """A third process admits the call and is killed while its tool blocks."""
        model = self.keys[causal]
        caller = self._caller(who)
        tool, payload = DECISIONS[causal]
        running = asyncio.Event()
        tools = self.harness.tools

        async def block(invocation: ToolInvocation) -> ToolResult:
            if report_start:
                reporter = tools[tool].reporter
                assert reporter is not None
                await reporter.effect_started(invocation.call_id)
            running.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        self._script(causal, block)
        try:
            result = self.run(
                attempt_then_crash(
                    self.harness, tool, payload, causal_id=causal, running=running, identity=caller
                )
            )
        except RunOfAnotherPrincipal:
            self._refused_as_foreign(caller)
            return
        except AttemptInFlight:
            self._expect_in_flight(model, caller)
            return
        finally:
            tools[tool].script.clear()
        assert caller is self.owner, (caller.principal_id, result)
        if result is not None:
            self._apply(model, result, caller)
            return
        assert model.expect(caller.principal_id)[0] == "executed", model
        STATS["crash"] += 1
        model.dispatched += 1
        model.in_flight = True
        # A read-only tool has no effect to start: its report is not made durable.
        model.crash_started = report_start and tool != "read"
        if model.unsafe:
            model.sealed = True
        if model.confirmation_state == "APPROVED":
            model.confirmation_state = "RESERVED"

    @rule()
    def recover(self) -> None:
        settled = self.run(self.harness.lifecycle.sweeper.sweep())
        recovered = {
            item.causal_id: item.boundary.value
            for item in settled
            if item.run_id == self.harness.run_id
        }
        assert set(recovered) == {c for c, m in self.keys.items() if m.in_flight}
        for causal, boundary in recovered.items():
            model = self.keys[causal]
            expected = "EFFECT_STARTED" if model.crash_started else "EFFECT_STATE_UNKNOWN"
            assert boundary == expected, (model, boundary)
            model.in_flight = False
            model.settled(boundary, False)
            self.journal_length += 1
            self.flagged = True
        STATS["recovered"] += len(recovered)
        STATS["sweeps"] += 1

    @rule(causal=st.sampled_from(["a1", "a2"]), who=st.sampled_from(sorted(APPROVERS)))
    def approve(self, causal: str, who: str) -> None:
        model = self.keys[causal]
        if model.confirmation_state != "PENDING":
            return
        assert model.confirmation_id is not None
        approver = APPROVERS[who]
        if approver.principal_id == model.requester:
            try:
                self.run(self.harness.approve(model.confirmation_id, approver))
            except SelfApproval:
                STATS["self_approval_refused"] += 1
                return
            raise AssertionError("a requester approved their own request")
        self.run(self.harness.approve(model.confirmation_id, approver))
        model.confirmation_state = "APPROVED"
        self.journal_length += 1  # the decision is journaled
        STATS["approved"] += 1

    @rule(causal=st.sampled_from(["a1", "a2"]))
    def requester_tries_to_approve(self, causal: str) -> None:
        """Four eyes: a requester whose key also approves may not approve itself."""
        model = self.keys[causal]
        if model.confirmation_state != "PENDING" or model.requester != DUAL.principal_id:
            return
        assert model.confirmation_id is not None
        with pytest.raises(SelfApproval):
            self.run(self.harness.approve(model.confirmation_id, DUAL))
        STATS["self_approval_refused"] += 1

    @rule(causal=st.sampled_from(["a1", "a2"]), who=st.sampled_from(sorted(APPROVERS)))
    def deny(self, causal: str, who: str) -> None:
        model = self.keys[causal]
        if model.confirmation_state not in ("PENDING", "APPROVED"):
            return
        assert model.confirmation_id is not None
        self.run(self.harness.deny(model.confirmation_id, APPROVERS[who]))
        model.confirmation_state = "DENIED"
        self.journal_length += 1
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
        assert set(h.in_flight()) == {c for c, m in self.keys.items() if m.in_flight}
        # Every consumed capability is on record: its attempt's journal entry, or the
        # attempt row while it is in flight. No capability exists unconsumed.
        consumed = Counter(
            c
            for (c,) in h.sql(
                "SELECT causal_id FROM journal_entries WHERE run_id = %s"
                " AND kind IN ('execution', 'recovery')"
                " UNION ALL SELECT causal_id FROM attempts WHERE run_id = %s",
                run,
                run,
            )
        )
        for causal, model in self.keys.items():
            assert consumed[causal] == model.dispatched, (causal, model, consumed)
            if model.confirmation_id is not None:
                assert h.confirmation_state(model.confirmation_id) == model.confirmation_state
        rows = h.sql("SELECT journal_length, audit_incomplete FROM runs WHERE run_id = %s", run)
        if rows:
            assert rows[0] == (self.journal_length, self.flagged)
            report_ = self.run(h.lifecycle.evidence.verify(AGENT.tenant_id, RunId(run)))
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
        f" {STATS['recovered']} recovered ({STATS['sweeps']} sweeps),"
        f" {STATS['identity_mismatch']} identity mismatches,"
        f" {STATS['approved']} approvals, {STATS['self_approval_refused']} self-approvals refused,"
        f" {STATS['denied']} denials), 0 violations"
    )
    assert STATS["crash"] > 0
    assert STATS["recovered"] > 0
    assert STATS["identity_mismatch"] > 0
    if FULL:  # at CI size the search may not reach it; test_identity.py always does
        assert STATS["self_approval_refused"] > 0

"""The journal transaction of DESIGN §2 step 3: classify, append, settle.

If the journal cannot be written after a few quick retries, the caller is told
the run is audit-incomplete and the result is held. A held result is journaled
once the store answers, in one transaction with the run's audit-incomplete flag
(so the flag can never be lost between the two). Only failures that can succeed
later are retried (the store unreachable, a serialization conflict); a failure
that cannot (a constraint, an unmigrated schema, another result already
journaled for the attempt) settles the attempt as recovery would — uncertain,
and the run flagged — so a live process never keeps a stuck intent. If this
process dies first, recovery does the same: a result is never dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arvis.domain.clock import Clock
from arvis.domain.errors import SerializationConflict, StoreError, StoreUnavailable
from arvis.domain.journal import ExecutionArtifact, Problem
from arvis.lifecycle.admission import Admitted
from arvis.lifecycle.entries import consumed_capability, settle_append
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import JournalEntry
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.lifecycle.results import SyscallResult, result_from_entry
from arvis.lifecycle.retry import retry_transaction
from arvis.tools.outcome import DispatchOutcome

log = logging.getLogger(__name__)

# What can succeed if tried again later; everything else never will as written.
TRANSIENT = (StoreUnavailable, SerializationConflict)
_LATE_MAX_DELAY_S = 5.0


@dataclass(eq=False, kw_only=True)
class Settlement:
    store: LifecycleStore
    clock: Clock
    attempts: int
    sweeper: RecoverySweeper
    _late: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _given_up: int = field(default=0, init=False)

    async def settle(self, admitted: Admitted, outcome: DispatchOutcome) -> SyscallResult:
        """Journal a dispatched attempt and answer its result (DESIGN §2 step 3)."""
        intent = admitted.intent
        artifact = execution_artifact(admitted, outcome)
        recorded_at = self.clock.now()
        try:
            entry = await retry_transaction(
                lambda: self._journal(admitted, outcome, artifact, recorded_at, late=False),
                attempts=self.attempts,
            )
        except (StoreError, JournalConflict) as exc:
            log.error(
                "journal of intent %s failed after dispatch (%s); its result is held",
                intent.intent_id,
                exc.code,
            )
            self.track(self._journal_when_back(admitted, outcome, artifact, recorded_at))
            return _unjournaled_result(admitted, outcome, artifact)
        return result_from_entry(entry, artifact=artifact)

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` to its end in the background; :meth:`drain` waits for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def _journal(
        self,
        admitted: Admitted,
        outcome: DispatchOutcome,
        artifact: ExecutionArtifact,
        recorded_at: datetime,
        *,
        late: bool,
    ) -> JournalEntry:
        intent = admitted.intent
        answer = await self.store.journal(
            settle_append(
                key=intent.key,
                intent_id=intent.intent_id,
                confirmation_id=intent.confirmation_id,
                boundary=outcome.boundary,
                artifact=artifact,
                recorded_at=recorded_at,
                # The caller was told the run is audit-incomplete: the flag commits
                # with the late entry or not at all.
                flag=f"the result of intent {intent.intent_id} was journaled late"
                if late
                else None,
            )
        )
        if answer.status not in ("appended", "existing"):
            raise JournalConflict(
                f"attempt {intent.attempt} of {intent.idempotency_key[:12]}… was settled "
                "by someone else or journaled with another result"
            )
        assert answer.entry is not None
        return answer.entry

    async def _journal_when_back(
        self,
        admitted: Admitted,
        outcome: DispatchOutcome,
        artifact: ExecutionArtifact,
        recorded_at: datetime,
    ) -> None:
        """Journal a held result once the store answers; give up only on failures
        that can never succeed, and then settle the attempt as recovery would."""
        intent = admitted.intent
        delay = 0.25
        while True:
            try:
                await self._journal(admitted, outcome, artifact, recorded_at, late=True)
            except TRANSIENT:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _LATE_MAX_DELAY_S)
                continue
            except (StoreError, JournalConflict) as exc:
                log.error(
                    "the held result of intent %s can never be journaled (%s): %s",
                    intent.intent_id,
                    exc.code,
                    exc.message,
                )
                self._given_up += 1
                break
            log.warning("held result of intent %s journaled late", intent.intent_id)
            return
        await self._settle_as_interrupted(admitted)

    async def _settle_as_interrupted(self, admitted: Admitted) -> None:
        intent = admitted.intent
        context = intent.context
        while True:
            try:
                await self.sweeper.settle_attempt(context.tenant_id, intent.idempotency_key)
                return
            except TRANSIENT:
                await asyncio.sleep(_LATE_MAX_DELAY_S)
            except StoreError as exc:
                # Nothing more this process can do: once it stops and releases its
                # lease, any instance's sweeper settles the attempt.
                log.critical(
                    "intent %s stays unsettled until this instance stops: %s",
                    intent.intent_id,
                    exc.message,
                )
                return

    @property
    def unjournaled(self) -> int:
        """Admitted attempts of this process whose result is not journaled: held and
        still being retried, or given up on (then settled as interrupted). A process
        that stops with this above zero lost a result (docs/deploy.md)."""
        return len(self._late) + self._given_up

    async def drain(self, timeout_s: float) -> bool:
        """Wait for held results to be journaled; True when none is left."""
        if not self._late:
            return True
        _, pending = await asyncio.wait(set(self._late), timeout=timeout_s)
        return not pending


def execution_artifact(admitted: Admitted, outcome: DispatchOutcome) -> ExecutionArtifact:
    """What the journal records of a dispatched attempt.

    Every part is a value ARVIS built (the intent, its receipt) or the dispatcher
    classified (the outcome): assembled without validating any of it again.
    """
    intent = admitted.intent
    result: Any = None
    problem: Problem | None = None
    retryable = False
    if outcome.result is not None:
        tool_problem = outcome.result.problem
        if tool_problem is None:
            result = outcome.result.value
        else:
            problem = Problem.model_construct(
                code=tool_problem.code,
                detail=tool_problem.detail,
                effect_started=tool_problem.effect_started,
                retryable=False,
            )
    else:
        assert outcome.failure is not None
        failure = outcome.failure
        problem = Problem.model_construct(
            code=failure.code,
            detail=failure.message,
            effect_started=failure.effect_started,
            retryable=failure.retryable,
        )
        retryable = failure.retryable
    return ExecutionArtifact.model_construct(
        tool=intent.tool,
        plan_id=intent.plan_id,
        payload_digest=intent.payload.digest,
        payload=None,
        context=intent.context,
        capability=consumed_capability(intent.capability_id, intent.admitted_at),
        confirmation_id=intent.confirmation_id,
        receipt=admitted.receipt.journaled(),
        result=result,
        problem=problem,
        retryable=retryable,
        policy=admitted.policy,
    )


def _unjournaled_result(
    admitted: Admitted, outcome: DispatchOutcome, artifact: ExecutionArtifact
) -> SyscallResult:
    intent = admitted.intent
    assert artifact.receipt is not None
    return SyscallResult(
        outcome="executed",
        boundary=outcome.boundary,
        result=artifact.result,
        problem=None if artifact.problem is None else artifact.problem.model_dump(),
        detail="the result could not be journaled yet; the run is flagged audit-incomplete",
        idempotency_key=intent.idempotency_key,
        attempt=intent.attempt,
        run_id=intent.context.run_id,
        causal_id=intent.context.causal_id,
        receipt=artifact.receipt,
        journal_position=None,
        audit_incomplete=True,
    )

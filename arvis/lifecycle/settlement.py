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
from datetime import datetime
from typing import Any

from arvis.domain.artifacts import Intent
from arvis.domain.clock import Clock
from arvis.domain.errors import SerializationConflict, StoreError, StoreUnavailable
from arvis.lifecycle import journal
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.fast import Admitted
from arvis.lifecycle.ports import FastPath, JournalEntry, LifecycleStore
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.lifecycle.results import Receipt, SyscallResult, result_from_entry
from arvis.lifecycle.retry import retry_transaction
from arvis.tools.outcome import DispatchOutcome

log = logging.getLogger(__name__)

# What can succeed if tried again later; everything else never will as written.
TRANSIENT = (StoreUnavailable, SerializationConflict)
_LATE_MAX_DELAY_S = 5.0


class Settlement:
    def __init__(
        self,
        *,
        store: LifecycleStore,
        fast: FastPath | None,
        clock: Clock,
        attempts: int,
        sweeper: RecoverySweeper,
    ) -> None:
        self.store = store
        self.fast = fast
        """One-statement journal transaction; None uses the unit of work instead."""
        self.clock = clock
        self.attempts = attempts
        self.sweeper = sweeper
        self._late: set[asyncio.Task[None]] = set()
        self._given_up = 0

    async def settle(self, admitted: Admitted, outcome: DispatchOutcome) -> SyscallResult:
        """Journal a dispatched attempt and answer its result (DESIGN §2 step 3)."""
        intent = admitted.intent
        body = _execution_body(admitted, outcome)
        recorded_at = self.clock.now()
        try:
            entry = await retry_transaction(
                lambda: self._journal(intent, outcome, body, recorded_at, late=False),
                attempts=self.attempts,
            )
        except (StoreError, JournalConflict) as exc:
            log.error(
                "journal of intent %s failed after dispatch (%s); its result is held",
                intent.intent_id,
                exc.code,
            )
            self.track(self._journal_when_back(intent, outcome, body, recorded_at))
            return _unjournaled_result(admitted, outcome, body)
        return result_from_entry(entry)

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` to its end in the background; :meth:`drain` waits for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def _journal(
        self,
        intent: Intent,
        outcome: DispatchOutcome,
        body: dict[str, Any],
        recorded_at: datetime,
        *,
        late: bool,
    ) -> JournalEntry:
        context = intent.context
        boundary = outcome.boundary
        retryable = outcome.failure.retryable if outcome.failure is not None else False
        if self.fast is not None and not late:
            return await self.fast.journal_execution(
                tenant_id=context.tenant_id,
                run_id=context.run_id,
                causal_id=context.causal_id,
                idempotency_key=intent.idempotency_key,
                attempt=intent.attempt,
                intent_id=intent.intent_id,
                boundary=boundary.value,
                body_text=journal.body_text(body),
                recorded_at=recorded_at,
                retryable=retryable,
                confirmation_id=intent.confirmation_id,
            )
        async with self.store.unit_of_work() as uow:
            entry = await journal.record_attempt(
                uow,
                tenant_id=context.tenant_id,
                run_id=context.run_id,
                kind="execution",
                causal_id=context.causal_id,
                idempotency_key=intent.idempotency_key,
                attempt=intent.attempt,
                intent_id=intent.intent_id,
                boundary=boundary,
                body=body,
                recorded_at=recorded_at,
                retryable=retryable,
                confirmation_id=intent.confirmation_id,
            )
            if late:
                # The caller was told the run is audit-incomplete: the flag commits
                # with the entry or not at all.
                await uow.runs.flag_audit_incomplete(
                    context.tenant_id,
                    context.run_id,
                    f"the result of intent {intent.intent_id} was journaled late",
                )
            await uow.commit()
        return entry

    async def _journal_when_back(
        self,
        intent: Intent,
        outcome: DispatchOutcome,
        body: dict[str, Any],
        recorded_at: datetime,
    ) -> None:
        """Journal a held result once the store answers; give up only on failures
        that can never succeed, and then settle the attempt as recovery would."""
        delay = 0.25
        while True:
            try:
                await self._journal(intent, outcome, body, recorded_at, late=True)
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
        await self._settle_as_interrupted(intent)

    async def _settle_as_interrupted(self, intent: Intent) -> None:
        context = intent.context
        reason = f"the result of intent {intent.intent_id} could not be journaled"
        while True:
            try:
                await self.sweeper.settle_intent(context.tenant_id, intent.intent_id, reason)
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


def _execution_body(admitted: Admitted, outcome: DispatchOutcome) -> dict[str, Any]:
    intent = admitted.intent
    receipt = admitted.receipt
    body: dict[str, Any] = {
        "tool": intent.tool,
        "plan_id": intent.plan_id,
        "payload_digest": intent.payload.digest,
        "principal_id": intent.context.principal_id,
        "capability_id": intent.capability_id,
        "confirmation_id": intent.confirmation_id,
        "receipt": Receipt(
            position=receipt.position,
            intent_commitment=receipt.intent_commitment,
            store_fingerprint=receipt.store_fingerprint,
        ).model_dump(),
        "result": None,
        "problem": None,
        "retryable": False,
    }
    if outcome.result is not None:
        problem = outcome.result.problem
        if problem is None:
            body["result"] = outcome.result.value
        else:
            body["problem"] = problem.model_dump()
    else:
        assert outcome.failure is not None
        failure = outcome.failure
        body["problem"] = {
            "code": failure.code,
            "detail": failure.message,
            "effect_started": failure.effect_started,
            "retryable": failure.retryable,
        }
        body["retryable"] = failure.retryable
    return body


def _unjournaled_result(
    admitted: Admitted, outcome: DispatchOutcome, body: dict[str, Any]
) -> SyscallResult:
    intent = admitted.intent
    return SyscallResult(
        outcome="executed",
        boundary=outcome.boundary,
        result=body["result"],
        problem=body["problem"],
        detail="the result could not be journaled yet; the run is flagged audit-incomplete",
        idempotency_key=intent.idempotency_key,
        attempt=intent.attempt,
        run_id=intent.context.run_id,
        causal_id=intent.context.causal_id,
        receipt=Receipt.model_validate(body["receipt"]),
        journal_position=None,
        audit_incomplete=True,
    )

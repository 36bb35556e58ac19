"""The journal transaction of DESIGN §2 step 3: classify, append, settle.

If the journal cannot be written after a few retries the caller is told the run
is audit-incomplete; the result is held and journaled as soon as the store
answers, and the run is flagged. If this process dies first, recovery journals
the attempt as ``EFFECT_STATE_UNKNOWN``: a result is never dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from arvis.domain.artifacts import Intent
from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.errors import StoreError
from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle import journal
from arvis.lifecycle.fast import Admitted
from arvis.lifecycle.ports import FastPath, JournalEntry, LifecycleStore
from arvis.lifecycle.results import Receipt, SyscallResult, result_from_entry
from arvis.lifecycle.retry import retry_transaction
from arvis.tools.outcome import DispatchOutcome

log = logging.getLogger(__name__)


class Settlement:
    def __init__(
        self,
        *,
        store: LifecycleStore,
        fast: FastPath | None,
        clock: Clock,
        attempts: int,
    ) -> None:
        self.store = store
        self.fast = fast
        """One-statement journal transaction; None uses the unit of work instead."""
        self.clock = clock
        self.attempts = attempts
        self._late: set[asyncio.Task[None]] = set()

    async def settle(self, admitted: Admitted, outcome: DispatchOutcome) -> SyscallResult:
        """Journal a dispatched attempt and answer its result (DESIGN §2 step 3)."""
        intent = admitted.intent
        boundary = outcome.boundary
        body = _execution_body(admitted, outcome)
        recorded_at = self.clock.now()
        try:
            entry = await retry_transaction(
                lambda: self._journal(intent, outcome, boundary, body, recorded_at),
                attempts=self.attempts,
            )
        except StoreError:
            log.error(
                "journal unreachable after dispatch; result of intent %s is held for later",
                intent.intent_id,
            )
            self._journal_later(admitted, outcome, body, recorded_at)
            return _unjournaled_result(admitted, outcome, body)
        return result_from_entry(entry)

    async def _journal(
        self,
        intent: Intent,
        outcome: DispatchOutcome,
        boundary: EffectBoundary,
        body: dict[str, Any],
        recorded_at: Any,
    ) -> JournalEntry:
        context = intent.context
        retryable = outcome.failure.retryable if outcome.failure is not None else False
        if self.fast is not None:
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
            await uow.commit()
        return entry

    def _journal_later(
        self,
        admitted: Admitted,
        outcome: DispatchOutcome,
        body: dict[str, Any],
        recorded_at: Any,
    ) -> None:
        task = asyncio.create_task(self._journal_when_back(admitted, outcome, body, recorded_at))
        self._late.add(task)
        task.add_done_callback(self._late.discard)

    async def _journal_when_back(
        self,
        admitted: Admitted,
        outcome: DispatchOutcome,
        body: dict[str, Any],
        recorded_at: Any,
    ) -> None:
        """Journal a held result once the store answers, and flag the run: the caller
        was told the run is audit-incomplete, and that must stay visible."""
        intent = admitted.intent
        context = intent.context
        delay = 0.5
        while True:
            try:
                await self._journal(intent, outcome, outcome.boundary, body, recorded_at)
            except StoreError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            except Exception:
                log.exception("held result of intent %s could not be journaled", intent.intent_id)
            break
        try:
            await retry_transaction(lambda: self._flag(context.tenant_id, context.run_id))
        except StoreError:
            log.error("run %s could not be flagged audit-incomplete", context.run_id)

    async def _flag(self, tenant_id: TenantId, run_id: RunId) -> None:
        async with self.store.unit_of_work() as uow:
            await uow.runs.flag_audit_incomplete(
                TenantId(tenant_id), RunId(run_id), "result journaled late after a store outage"
            )
            await uow.commit()

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

"""Recovery (DESIGN §6): settle what crashed instances left behind. Never runs a tool.

An intent is committed before its tool runs and settled by the journal
transaction after it. An unsettled intent whose owner's lease has expired or
was released was therefore interrupted somewhere in between. Its capability
was consumed in the very transaction that wrote the intent, so the tool may
have run: the sweeper journals ``EFFECT_STARTED`` when the tool had durably
reported its start (``intents.started_at``), else ``EFFECT_STATE_UNKNOWN``, and
flags the run audit-incomplete; the consent (if any) is consumed, and the retry
table refuses an unsafe tool's retry.

DESIGN §6 also names a branch "never consumed ⇒ revoked, EFFECT_NOT_STARTED".
No path writes an intent without consuming its capability in the same
transaction (docs/architecture.md, "Recovery"), so that branch cannot be
reached and is not written: an intent is settled only as uncertain.

Each intent is settled in a transaction of its own, claimed with
``FOR UPDATE SKIP LOCKED``, so any number of sweepers on any number of
instances settle each intent exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.errors import StoreError
from arvis.domain.ids import IntentId, TenantId
from arvis.lifecycle import journal
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.ports import LifecycleStore, LifecycleUnitOfWork, UnsettledIntent

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SettledIntent:
    tenant_id: str
    run_id: str
    causal_id: str
    intent_id: str
    tool: str
    attempt: int
    boundary: EffectBoundary
    journal_position: int
    owner: str


class RecoverySweeper:
    def __init__(self, store: LifecycleStore, clock: Clock, *, batch_limit: int = 1000) -> None:
        self.store = store
        self.clock = clock
        self.batch_limit = batch_limit

    async def sweep(self, *, owner: str | None = None) -> list[SettledIntent]:
        """Settle every unsettled intent of expired or released leases, or, with
        ``owner``, of that lease name (which the caller has just claimed free)."""
        settled: list[SettledIntent] = []
        while len(settled) < self.batch_limit:
            one = await self._settle_one(owner=owner)
            if one is None:
                break
            settled.append(one)
        for item in settled:
            log.warning(
                "recovered intent %s of run %s as %s",
                item.intent_id,
                item.run_id,
                item.boundary.value,
                extra={"run_id": item.run_id, "causal_id": item.causal_id},
            )
        return settled

    async def settle_intent(self, tenant_id: TenantId, intent_id: IntentId, reason: str) -> None:
        """Settle one intent as interrupted, whoever owns it, and flag its run.

        For the owner itself, when it can never journal the attempt's real result.
        If the attempt is settled already, only the flag is written.
        """
        async with self.store.unit_of_work() as uow:
            found = await uow.intents.unsettled(limit=1, intent=(tenant_id, intent_id))
            if found:
                await self._settle(uow, found[0])
            else:
                run_id = await uow.intents.run_of(tenant_id, intent_id)
                if run_id is not None:
                    await uow.runs.flag_audit_incomplete(tenant_id, run_id, reason)
            await uow.commit()

    async def _settle_one(self, *, owner: str | None) -> SettledIntent | None:
        async with self.store.unit_of_work() as uow:
            found = await uow.intents.unsettled(limit=1, owner=owner)
            if not found:
                return None
            settled = await self._settle(uow, found[0])
            await uow.commit()
        return settled

    async def _settle(self, uow: LifecycleUnitOfWork, intent: UnsettledIntent) -> SettledIntent:
        boundary = (
            EffectBoundary.EFFECT_STARTED if intent.started else EffectBoundary.EFFECT_STATE_UNKNOWN
        )
        await uow.runs.flag_audit_incomplete(
            intent.tenant_id,
            intent.run_id,
            f"intent {intent.intent_id} was interrupted after its capability was consumed",
        )
        entry = await journal.record_attempt(
            uow,
            tenant_id=intent.tenant_id,
            run_id=intent.run_id,
            kind="recovery",
            causal_id=intent.causal_id,
            idempotency_key=intent.idempotency_key,
            attempt=intent.attempt,
            intent_id=intent.intent_id,
            boundary=boundary,
            body=_recovery_body(intent),
            recorded_at=self.clock.now(),
            retryable=False,
            confirmation_id=intent.confirmation_id,
        )
        return SettledIntent(
            tenant_id=intent.tenant_id,
            run_id=intent.run_id,
            causal_id=intent.causal_id,
            intent_id=intent.intent_id,
            tool=intent.tool,
            attempt=intent.attempt,
            boundary=boundary,
            journal_position=entry.position,
            owner=intent.instance_id,
        )


def _recovery_body(intent: UnsettledIntent) -> dict[str, Any]:
    detail = (
        "the instance that ran this attempt stopped after the tool reported that its "
        "effect started, before the end was journaled"
        if intent.started
        else "the instance that ran this attempt stopped before journaling it; "
        "whether the effect happened is unknown"
    )
    return {
        "tool": intent.tool,
        "capability_id": intent.capability_id,
        "confirmation_id": intent.confirmation_id,
        "receipt": None,
        "result": None,
        "problem": {
            "code": "recovered_started" if intent.started else "recovered_unknown",
            "detail": detail,
            "effect_started": True if intent.started else None,
            "retryable": False,
        },
        "recovered_from": intent.instance_id,
        "intent_commitment": intent.commitment,
        "receipt_position": intent.receipt_position,
        "retryable": False,
    }


class RecoveryRuntime:
    """The background half of DESIGN §6: this process's lease and periodic sweeps."""

    def __init__(
        self,
        lease: InstanceLease,
        sweeper: RecoverySweeper,
        *,
        sweep_interval_s: float,
    ) -> None:
        self.lease = lease
        self.sweeper = sweeper
        self.sweep_interval_s = sweep_interval_s
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> list[SettledIntent]:
        """Claim a lease, settle what the claimed name's earlier holder left (it is
        free, so that holder is gone), sweep expired owners once, start the loops."""
        name = await self.lease.claim()
        settled = await self.sweeper.sweep(owner=name)
        settled += await self.sweeper.sweep()
        self._tasks = [
            asyncio.create_task(self._every(self.lease.ttl_s / 3, self.lease.beat)),
            asyncio.create_task(self._every(self.sweep_interval_s, self._sweep)),
        ]
        return settled

    async def _sweep(self) -> None:
        await self.sweeper.sweep()

    async def _every(self, interval_s: float, action: Any) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await action()
            except StoreError as exc:
                # An outage is not a crash: keep beating and sweeping once it ends.
                log.warning("background %s failed: %s", action.__name__, exc.message)
            except Exception:
                log.exception("background %s failed", action.__name__)

    async def stop(self) -> None:
        """Stop the loops and release the lease (after the handler has drained)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        with contextlib.suppress(StoreError):
            await self.lease.release()

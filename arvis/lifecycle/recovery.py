"""Recovery (DESIGN §6): settle what crashed instances left behind. Never runs a tool.

An intent is committed before its tool runs and settled by the journal
transaction after it. An unsettled intent whose owner's lease has expired was
therefore interrupted somewhere in between:

- its capability was consumed: the tool may have run. The sweeper journals
  ``EFFECT_STATE_UNKNOWN`` and flags the run audit-incomplete; the consent (if
  any) is consumed, and the retry table refuses an unsafe tool's retry.
- its capability was never consumed: nothing ran. The capability is revoked,
  ``EFFECT_NOT_STARTED`` is journaled, and the consent is released.

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
from arvis.lifecycle import journal
from arvis.lifecycle.ports import LifecycleStore, UnsettledIntent

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
        """Settle every unsettled intent of expired leases (or of ``owner``)."""
        settled: list[SettledIntent] = []
        while len(settled) < self.batch_limit:
            one = await self._settle_one(owner)
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

    async def _settle_one(self, owner: str | None) -> SettledIntent | None:
        async with self.store.unit_of_work() as uow:
            found = await uow.intents.unsettled(expired_owners_only=True, limit=1, owner=owner)
            if not found:
                return None
            intent = found[0]
            consumed = intent.capability_state == "CONSUMED"
            if consumed:
                boundary = EffectBoundary.EFFECT_STATE_UNKNOWN
                await uow.runs.flag_audit_incomplete(
                    intent.tenant_id,
                    intent.run_id,
                    f"intent {intent.intent_id} was interrupted after its capability was consumed",
                )
            else:
                boundary = EffectBoundary.EFFECT_NOT_STARTED
                await uow.capabilities.revoke(
                    intent.tenant_id, intent.capability_id, "recovered before consumption"
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
                body=_recovery_body(intent, consumed),
                recorded_at=self.clock.now(),
                retryable=False,
                confirmation_id=intent.confirmation_id,
            )
            await uow.commit()
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


def _recovery_body(intent: UnsettledIntent, consumed: bool) -> dict[str, Any]:
    return {
        "tool": intent.tool,
        "capability_id": intent.capability_id,
        "confirmation_id": intent.confirmation_id,
        "receipt": None,
        "result": None,
        "problem": {
            "code": "recovered_unknown" if consumed else "recovered_not_started",
            "detail": (
                "the instance that ran this attempt stopped before journaling it; "
                "whether the effect happened is unknown"
                if consumed
                else "the instance stopped before the tool could run"
            ),
            "effect_started": None if consumed else False,
            "retryable": False,
        },
        "recovered_from": intent.instance_id,
        "intent_commitment": intent.commitment,
        "receipt_position": intent.receipt_position,
        "retryable": False,
    }


class InstanceLease:
    """This instance's heartbeat row: held while it runs, released when it stops."""

    def __init__(self, store: LifecycleStore, instance_id: str, ttl_s: float) -> None:
        self.store = store
        self.instance_id = instance_id
        self.ttl_s = ttl_s

    async def hold(self) -> None:
        async with self.store.unit_of_work() as uow:
            await uow.leases.hold(self.instance_id, self.ttl_s)
            await uow.commit()

    async def release(self) -> None:
        async with self.store.unit_of_work() as uow:
            await uow.leases.release(self.instance_id)
            await uow.commit()


class RecoveryRuntime:
    """The background half of recovery: heartbeat and periodic sweeps."""

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
        """Settle what a previous life of this instance id left, hold the lease,
        sweep expired owners once, and start the loops."""
        settled = await self.sweeper.sweep(owner=self.lease.instance_id)
        await self.lease.hold()
        settled += await self.sweeper.sweep()
        self._tasks = [
            asyncio.create_task(self._every(self.lease.ttl_s / 3, self.lease.hold)),
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
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        with contextlib.suppress(StoreError):
            await self.lease.release()

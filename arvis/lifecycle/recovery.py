"""Recovery (DESIGN §6): settle what dead instances left behind. Never runs a tool.

An attempt is admitted (its ``attempts`` row committed, its capability minted,
activated and consumed in that one statement) before its tool runs, and the
journal entry that settles it deletes the row after. An attempt still in flight
whose owner's lease has expired or was released was therefore interrupted
somewhere in between, and the tool may have run: the sweeper journals
``EFFECT_STARTED`` when the tool had durably reported its start
(``attempts.started_at``), else ``EFFECT_STATE_UNKNOWN``, and flags the run
audit-incomplete; the consent (if any) is consumed, and the retry table refuses
an unsafe tool's retry.

DESIGN §6 also names a branch "never consumed ⇒ revoked, EFFECT_NOT_STARTED".
No path writes an attempt without consuming its capability in the same
statement (docs/architecture.md, "Recovery"), so that branch cannot be reached
and is not written: an interrupted attempt is settled only as uncertain.

Each attempt is settled in a transaction of its own by ``arvis_journal``, which
deletes the attempt's row before it appends: of any number of sweepers on any
number of instances (and a late owner), exactly one settles each attempt.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import KW_ONLY, dataclass, field

from arvis.domain.authorization import PolicyRecord
from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import StoreError
from arvis.domain.ids import IdempotencyKey, TenantId
from arvis.domain.journal import Problem, RecoveryArtifact
from arvis.lifecycle.chores import Chores
from arvis.lifecycle.consent.reconcile import Reconciler
from arvis.lifecycle.entries import consumed_capability, journal_receipt, settle_append
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import InFlightAttempt

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


@dataclass(eq=False)
class RecoverySweeper:
    store: LifecycleStore
    clock: Clock
    _: KW_ONLY
    store_fingerprint: str = ""
    """Empty: the store's own."""
    batch_limit: int = 1000
    reconciler: Reconciler | None = None
    """Asks tools' reconcile hooks about the uncertain attempts (issue 16)."""

    def __post_init__(self) -> None:
        self.store_fingerprint = self.store_fingerprint or self.store.fingerprint

    async def sweep(self, *, owner: str | None = None) -> list[SettledIntent]:
        """Settle every in-flight attempt of expired or released leases, or, with
        ``owner``, of that lease name (which the caller has just claimed free)."""
        settled: list[SettledIntent] = []
        # Candidates are read without locks; the settling statement deletes the
        # attempt's row first, so of two sweepers (or a sweeper and a late owner)
        # exactly one settles each attempt and the other learns it was taken.
        while len(settled) < self.batch_limit:
            found = await self.store.in_flight(
                limit=min(100, self.batch_limit - len(settled)), owner=owner
            )
            progress = False
            for attempt in found:
                one = await self._settle(attempt)
                if one is not None:
                    settled.append(one)
                    progress = True
            if not found or not progress:
                break
        for item in settled:
            log.warning(
                "recovered intent %s of run %s as %s",
                item.intent_id,
                item.run_id,
                item.boundary.value,
                extra={"run_id": item.run_id, "causal_id": item.causal_id},
            )
        if self.reconciler is not None:
            # What was just settled is due for its first ask, with every earlier
            # uncertain attempt whose next ask (with backoff) has come.
            await self.reconciler.sweep()
        return settled

    async def settle_attempt(self, tenant_id: TenantId, key: IdempotencyKey) -> None:
        """Settle the attempt of ``key`` in flight as interrupted, whoever owns it.

        For the owner itself, when it can never journal the attempt's real result.
        Settled already (e.g. by a sweeper, which flagged the run): nothing to do.
        """
        attempt = await self.store.attempt(tenant_id, key)
        if attempt is not None:
            await self._settle(attempt)

    async def _settle(self, attempt: InFlightAttempt) -> SettledIntent | None:
        boundary = (
            EffectBoundary.EFFECT_STARTED
            if attempt.started
            else EffectBoundary.EFFECT_STATE_UNKNOWN
        )
        answer = await self.store.journal(
            settle_append(
                key=attempt.key,
                intent_id=attempt.intent_id,
                confirmation_id=attempt.confirmation_id,
                boundary=boundary,
                artifact=recovery_artifact(attempt, self.store_fingerprint),
                recorded_at=self.clock.now(),
                flag=(
                    f"intent {attempt.intent_id} was interrupted after its capability was consumed"
                ),
            )
        )
        if answer.status != "appended":
            return None  # settled meanwhile by its owner or another sweeper
        assert answer.entry is not None
        return SettledIntent(
            tenant_id=attempt.tenant_id,
            run_id=attempt.run_id,
            causal_id=attempt.causal_id,
            intent_id=attempt.intent_id,
            tool=attempt.tool,
            attempt=attempt.attempt,
            boundary=boundary,
            journal_position=answer.entry.position,
            owner=attempt.owner,
        )


def recovery_artifact(attempt: InFlightAttempt, store_fingerprint: str) -> RecoveryArtifact:
    started = attempt.started
    detail = (
        "the instance that ran this attempt stopped after the tool reported that its "
        "effect started, before the end was journaled"
        if started
        else "the instance that ran this attempt stopped before journaling it; "
        "whether the effect happened is unknown"
    )
    return RecoveryArtifact(
        tool=attempt.tool,
        plan_id=attempt.plan_id,
        payload_digest=attempt.payload_digest,
        context=AuthorizedEffectContext.model_validate(attempt.context),
        capability=consumed_capability(attempt.capability_id, attempt.admitted_at),
        confirmation_id=attempt.confirmation_id,
        receipt=journal_receipt(attempt.receipt_position, attempt.commitment, store_fingerprint),
        problem=Problem(
            code="recovered_started" if started else "recovered_unknown",
            detail=detail,
            effect_started=True if started else None,
            retryable=False,
        ),
        recovered_from=attempt.owner,
        policy=None if attempt.policy is None else PolicyRecord.model_validate(attempt.policy),
    )


@dataclass(eq=False)
class RecoveryRuntime:
    """The background half of DESIGN §6: this process's lease and periodic sweeps."""

    lease: InstanceLease
    sweeper: RecoverySweeper
    _: KW_ONLY
    sweep_interval_s: float
    _chores: Chores = field(default_factory=Chores, init=False)

    async def start(self) -> list[SettledIntent]:
        """Take over the slots of this instance id whose holder died on this host,
        claim a lease, settle what the claimed name's earlier holder left (it is
        free, so that holder is gone), sweep released and expired owners once —
        the slots taken over among them, at once (DESIGN §10) — start the loops."""
        await self.lease.take_over()
        name = await self.lease.claim()
        settled = await self.sweeper.sweep(owner=name)
        settled += await self.sweeper.sweep()
        self._chores = Chores(
            [(self.lease.ttl_s / 3, self.lease.beat), (self.sweep_interval_s, self._sweep)]
        )
        self._chores.start()
        return settled

    async def _sweep(self) -> None:
        await self.sweeper.sweep()

    async def stop(self) -> None:
        """Stop the loops and release the lease (after the handler has drained)."""
        await self._chores.stop()
        with contextlib.suppress(StoreError):
            await self.lease.release()

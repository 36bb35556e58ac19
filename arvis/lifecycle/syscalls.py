"""SyscallHandler: the only route to a tool body (DESIGN §2).

One ``tool.execute`` on the happy path is two commits around the tool body:
admission (authorize, mint, intent + receipt, activate, consume) and journal
(classify, append to the run's chain, settle). Refusals and consent requests
commit once and run nothing.

Only a process holding a live lease admits (DESIGN §6). Admission and the
journal step each run to completion even when the caller is cancelled: an
admitted attempt always ends journaled (``EFFECT_NOT_STARTED`` when the tool
never ran), never as an intent stuck in a live process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from arvis.domain.artifacts import Intent
from arvis.domain.authorization import Authorized, DenialReason, DenialSnapshot
from arvis.domain.clock import Clock
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    CapabilityId,
    CausalId,
    ConfirmationId,
    InstanceId,
    IntentId,
    PlanId,
    RunId,
)
from arvis.domain.payload import FrozenEffectPayload, freeze_payload
from arvis.lifecycle.authorization import (
    AdmissionRequest,
    AwaitConsent,
    Deduplicated,
    InFlight,
    Proceed,
    Refuse,
    ToolAuthorizationService,
)
from arvis.lifecycle.effects import EffectDispatcher, not_dispatched
from arvis.lifecycle.errors import (
    AttemptInFlight,
    CapabilityError,
    IdentityRefused,
    ShuttingDown,
)
from arvis.lifecycle.fast import Admitted, FastAdmission
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.manager import ToolManager
from arvis.lifecycle.outbox import IntentOutboxService
from arvis.lifecycle.ports import (
    CausalIdConflict,
    FastPath,
    LifecycleStore,
    LifecycleUnitOfWork,
)
from arvis.lifecycle.refusals import answer_deduplicated, journal_refusal
from arvis.lifecycle.results import (
    ConfirmationRef,
    Syscall,
    SyscallResult,
)
from arvis.lifecycle.retry import retry_transaction
from arvis.lifecycle.settlement import Settlement
from arvis.tools.errors import PlanError
from arvis.tools.plans import PlanLease, ToolPlanSource, lease_plan

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_LEASE_LAPSED = not_dispatched(
    "lease_lapsed", "this instance's lease lapsed before the tool could run; nothing ran"
)
_CANCELLED_BEFORE_DISPATCH = not_dispatched(
    "dispatch_cancelled", "the call was cancelled before the tool ran; nothing ran"
)


@dataclass(frozen=True, slots=True)
class _Ids:
    """Taken once per syscall, outside any retry, so a retried step writes the same rows."""

    capability: CapabilityId
    intent: IntentId
    confirmation: ConfirmationId

    @classmethod
    def fresh(cls) -> _Ids:
        return cls(
            CapabilityId(f"cap_{uuid.uuid4().hex}"),
            IntentId(f"int_{uuid.uuid4().hex}"),
            ConfirmationId(f"cnf_{uuid.uuid4().hex}"),
        )


@dataclass(frozen=True, slots=True)
class _RunBoundElsewhere:
    """The run is bound to a plan other than the one leased: lease that one, try again."""

    plan_id: PlanId


class SyscallHandler:
    def __init__(
        self,
        *,
        store: LifecycleStore,
        plans: ToolPlanSource,
        authorization: ToolAuthorizationService,
        manager: ToolManager,
        outbox: IntentOutboxService,
        effects: EffectDispatcher,
        clock: Clock,
        lease: InstanceLease,
        settlement: Settlement,
        production: bool = False,
        phase_observer: Callable[[str, float], None] | None = None,
        fast: FastPath | None = None,
        fast_admission: bool = True,
    ) -> None:
        self.store = store
        self.plans = plans
        self.authorization = authorization
        self.manager = manager
        self.outbox = outbox
        self.effects = effects
        self.clock = clock
        self.lease = lease
        self.production = production
        self.phase_observer = phase_observer
        self.settlement = settlement
        self.fast_admission = (
            FastAdmission(fast, authorization, manager, outbox)
            if fast is not None and fast_admission
            else None
        )
        """Called with ("admission" | "dispatch" | "journal", seconds) after each phase."""
        self._admitting = True
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def handle(self, syscall: Syscall, identity: Identity) -> SyscallResult:
        """Govern one ``tool.execute``. Raises only for what is not a governed outcome:
        a refused identity, a payload that is not JSON, an attempt in flight, no live
        lease, or an unavailable store or audit sink (in which case nothing ran)."""
        if not self._admitting:
            raise ShuttingDown("this instance is shutting down; retry on another instance")
        self._require_identity(identity)
        payload = freeze_payload(syscall.decision.payload)
        owner = InstanceId(self.lease.require())
        ids = _Ids.fresh()
        self._in_flight += 1
        self._idle.clear()
        try:
            return await self._handle(syscall, identity, payload, ids, owner)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _handle(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: _Ids,
        owner: InstanceId,
    ) -> SyscallResult:
        clock = time.perf_counter
        started = clock()
        step = await self._run_to_end(self._admission(syscall, identity, payload, ids, owner))
        admitted = clock()
        self._observe("admission", admitted - started)
        if isinstance(step, SyscallResult):
            return step
        try:
            if step.blocked is not None:
                outcome, cancelled = step.blocked, False
            elif self.lease.held():
                definition = step.lease.plan.definitions.get(step.intent.tool)
                outcome, cancelled = await self.effects.dispatch(
                    step.lease.plan.dispatcher, step.intent, definition
                )
            else:
                # Our lease may have lapsed since admission: whoever sweeps may now
                # settle this attempt, so the tool must not run.
                outcome, cancelled = _LEASE_LAPSED, False
        finally:
            step.lease.release()
        dispatched = clock()
        self._observe("dispatch", dispatched - admitted)
        result = await self._run_to_end(self.settlement.settle(step, outcome))
        self._observe("journal", clock() - dispatched)
        if cancelled:
            raise asyncio.CancelledError
        return result

    async def _admission(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: _Ids,
        owner: InstanceId,
    ) -> SyscallResult | Admitted:
        try:
            return await retry_transaction(
                lambda: self._admit(syscall, identity, payload, ids, owner)
            )
        except CausalIdConflict as exc:
            conflict = exc
            return await retry_transaction(
                lambda: self._refuse_causal_conflict(syscall, identity, payload, conflict, owner)
            )

    async def _run_to_end(self, step: Awaitable[_T]) -> _T:
        """Run a store step to its end even if the caller is cancelled meanwhile.

        A step cut off mid-commit may have committed: an admission nobody
        dispatches, or a journal step half-known. So the step goes on in a task
        of its own; a cancelled caller leaves it to finish (and an attempt it
        admitted to be journaled as not started), then sees the cancellation.
        """
        task: asyncio.Task[_T] = asyncio.ensure_future(step)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self.settlement.track(self._abandon(task))
            raise

    async def _abandon(self, task: asyncio.Task[Any]) -> None:
        try:
            step = await task
        except Exception:
            return  # the step failed: nothing was admitted, or the journal step logged it
        if isinstance(step, Admitted):
            step.lease.release()
            await self.settlement.settle(step, _CANCELLED_BEFORE_DISPATCH)

    def _observe(self, phase: str, seconds: float) -> None:
        if self.phase_observer is not None:
            try:
                self.phase_observer(phase, seconds)
            except Exception:  # telemetry must never fail a syscall
                log.exception("phase observer failed")

    def _require_identity(self, identity: Identity) -> None:
        if self.production and identity.method != "api_key":
            raise IdentityRefused(
                f"{identity.method} identities are refused when ARVIS_ENV=production"
            )

    # -- admission (transaction 1) ------------------------------------------

    async def _admit(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: _Ids,
        owner: InstanceId,
    ) -> SyscallResult | Admitted:
        # Plans are leased before the admission transaction opens: leasing may
        # touch the store, and a transaction that waits for a second pooled
        # connection can starve the pool under load.
        lease: PlanLease | None = await lease_plan(self.plans)
        try:
            if self.fast_admission is not None and lease is not None:
                fast = await self.fast_admission.try_admit(
                    identity=identity,
                    run_id=RunId(syscall.run_id),
                    causal_id=CausalId(syscall.causal_id),
                    tool=syscall.decision.tool,
                    payload=payload,
                    lease=lease,
                    capability_id=ids.capability,
                    intent_id=ids.intent,
                    instance_id=owner,
                )
                if fast is not None:
                    return fast
            outcome = await self._admit_with(syscall, identity, payload, ids, lease, owner)
            if isinstance(outcome, _RunBoundElsewhere):
                if lease is not None:
                    lease.release()
                lease = None
                try:
                    lease = await lease_plan(self.plans, outcome.plan_id)
                except PlanError as exc:
                    log.warning(
                        "plan %s of run %s unavailable: %s", outcome.plan_id, syscall.run_id, exc
                    )
                outcome = await self._admit_with(
                    syscall, identity, payload, ids, lease, owner, bound_plan=outcome.plan_id
                )
                assert not isinstance(outcome, _RunBoundElsewhere)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if not isinstance(outcome, Admitted) and lease is not None:
            lease.release()
        return outcome

    async def _admit_with(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: _Ids,
        lease: PlanLease | None,
        owner: InstanceId,
        *,
        bound_plan: PlanId | None = None,
    ) -> SyscallResult | Admitted | _RunBoundElsewhere:
        tenant = identity.tenant_id
        run_id = RunId(syscall.run_id)
        async with self.store.unit_of_work() as uow:
            run = await uow.runs.get(tenant, run_id)
            if run is None:
                assert lease is not None
                run = await uow.runs.create(tenant, run_id, lease.plan.plan_id)
            if bound_plan is None and (lease is None or run.plan_id != lease.plan.plan_id):
                return _RunBoundElsewhere(run.plan_id)
            return await self._authorize_and_record(
                uow, syscall, identity, payload, ids, run.plan_id, lease, owner
            )

    async def _authorize_and_record(
        self,
        uow: LifecycleUnitOfWork,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        ids: _Ids,
        plan_id: PlanId,
        lease: PlanLease | None,
        owner: InstanceId,
    ) -> SyscallResult | Admitted:
        request = AdmissionRequest(
            identity=identity,
            run_id=RunId(syscall.run_id),
            causal_id=CausalId(syscall.causal_id),
            tool=syscall.decision.tool,
            payload=payload,
            plan=None if lease is None else lease.plan,
            plan_id=plan_id,
            instance_id=owner,
        )
        step = await self.authorization.authorize(uow, request)
        if isinstance(step, InFlight):
            raise AttemptInFlight(step.action.idempotency_key)
        if isinstance(step, Deduplicated):
            return await answer_deduplicated(uow, identity.tenant_id, step.action)
        if isinstance(step, AwaitConsent):
            confirmation = await self.manager.request_confirmation(
                uow, step, payload, ids.confirmation
            )
            await uow.commit()
            return SyscallResult(
                outcome="confirmation_required",
                boundary=None,
                detail="this action needs an approver's consent; re-post it once approved",
                idempotency_key=step.action.idempotency_key,
                run_id=syscall.run_id,
                causal_id=syscall.causal_id,
                confirmation=ConfirmationRef(
                    id=confirmation.confirmation_id, state=confirmation.state
                ),
            )
        if isinstance(step, Refuse):
            return await journal_refusal(uow, request, step.denial, step.attempt, self.clock.now())
        return await self._mint_and_record(uow, request, step, ids, plan_id, payload, lease)

    async def _mint_and_record(
        self,
        uow: LifecycleUnitOfWork,
        request: AdmissionRequest,
        step: Proceed,
        ids: _Ids,
        plan_id: PlanId,
        payload: FrozenEffectPayload,
        lease: PlanLease | None,
    ) -> SyscallResult | Admitted:
        assert lease is not None
        outcome = await self.manager.authorize(uow, step, ids.capability)
        self._validate(outcome)
        snapshot = outcome.snapshot
        tenant = snapshot.context.tenant_id
        intent = Intent(
            intent_id=ids.intent,
            context=snapshot.context,
            tool=snapshot.tool,
            plan_id=plan_id,
            payload=payload,
            idempotency_key=snapshot.idempotency_key,
            attempt=snapshot.attempt,
            capability_id=outcome.capability_id,
            confirmation_id=snapshot.confirmation_id,
        )
        receipt = await self.outbox.record(uow, intent)
        await self.effects.activate_and_consume(uow, intent, receipt)
        await uow.actions.begin_attempt(tenant, snapshot.idempotency_key, snapshot.attempt)
        await uow.commit()
        return Admitted(intent, receipt, lease)

    def _validate(self, outcome: Authorized) -> None:
        if not outcome.capability_id or not self.manager.owns(outcome.capability_id):
            raise CapabilityError("the capability was not minted by this manager")

    async def _refuse_causal_conflict(
        self,
        syscall: Syscall,
        identity: Identity,
        payload: FrozenEffectPayload,
        conflict: CausalIdConflict,
        owner: InstanceId,
    ) -> SyscallResult:
        request = AdmissionRequest(
            identity=identity,
            run_id=RunId(syscall.run_id),
            causal_id=CausalId(syscall.causal_id),
            tool=syscall.decision.tool,
            payload=payload,
            plan=None,
            plan_id=PlanId(""),
            instance_id=owner,
        )
        denial = DenialSnapshot(
            reason=DenialReason.CAUSAL_ID_CONFLICT,
            detail=conflict.message,
            tool=request.tool,
            idempotency_key=request.idempotency_key,
        )
        async with self.store.unit_of_work() as uow:
            return await journal_refusal(uow, request, denial, None, self.clock.now())

    def stop_admitting(self) -> None:
        """Refuse new syscalls from now on (graceful shutdown, first step)."""
        self._admitting = False

    async def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait for in-flight syscalls to finish and journal, and for held results.

        True when everything settled in time. What does not is left to recovery,
        which journals it as unknown: an interrupted effect is never dropped.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=timeout_s)
        except TimeoutError:
            return False
        return await self.settlement.drain(max(0.0, deadline - loop.time()))

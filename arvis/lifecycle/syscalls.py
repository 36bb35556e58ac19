"""SyscallHandler: the only route to a tool body (DESIGN §2).

One ``tool.execute`` on the happy path is two commits around the tool body:
admission (:mod:`arvis.lifecycle.admission`: decide, then one statement mints,
activates and consumes the capability and records the intent with its receipt)
and the journal step (:mod:`arvis.lifecycle.settlement`: classify, append to the
run's chain, settle). Refusals and consent requests commit once and run nothing.

Only a process holding a live lease admits (DESIGN §6). Admission and the
journal step each run to completion even when the caller is cancelled: an
admitted attempt always ends journaled (``EFFECT_NOT_STARTED`` when the tool
never ran), never as an intent stuck in a live process.

**The one edge** (DESIGN §10). HTTP, its fast lane, ``/mcp`` and the CLI only
translate their request into a :class:`Syscall`; every check that is not
translation is made here, once, for all of them: the run a per-turn instance
serves, the identity's method, a derived run id of another principal, and what
each entry point records of a syscall (the :class:`SyscallObserver`'s metrics,
the caller's log fields).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from arvis.domain.clock import Clock
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    CapabilityId,
    ConfirmationId,
    InstanceId,
    IntentId,
    reserved_for_another,
)
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.admission import AdmissionService, Admitted, Ids
from arvis.lifecycle.effects import EffectDispatcher, not_dispatched
from arvis.lifecycle.errors import (
    IdentityRefused,
    RunNotServed,
    RunOfAnotherPrincipal,
    ShuttingDown,
)
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.lifecycle.retry import retry_transaction
from arvis.lifecycle.settlement import Settlement
from arvis.tools.credentials import caller_token

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_LEASE_LAPSED = not_dispatched(
    "lease_lapsed", "this instance's lease lapsed before the tool could run; nothing ran"
)
_CANCELLED_BEFORE_DISPATCH = not_dispatched(
    "dispatch_cancelled", "the call was cancelled before the tool ran; nothing ran"
)


class SyscallObserver(Protocol):
    """What every syscall is counted by, whichever entry point it came through (the
    served app's metrics, ``arvis.web.metrics``). No method may block; one that raises
    is logged, never fails the syscall."""

    def observe_phase(self, phase: str, seconds: float) -> None:
        """After each phase: ``admission``, ``dispatch`` or ``journal``."""
        ...

    def observe_syscall(self, result: SyscallResult, seconds: float) -> None:
        """The syscall answered ``result`` after ``seconds`` in all."""
        ...

    def observe_error(self, code: str) -> None:
        """The syscall ended in the error of this code (nothing was answered)."""
        ...


class SyscallSpan(Protocol):
    """One syscall's trace, as the handler drives it (``arvis.telemetry`` has one)."""

    def phase(self, name: str) -> AbstractContextManager[object]:
        """Surrounds the phase ``admission``, ``dispatch`` or ``journal``."""
        ...

    def answered(self, result: SyscallResult) -> None:
        """The syscall answered ``result``; it must not raise."""
        ...


class SyscallTracer(Protocol):
    """Traces syscalls; its context manager sees any exception the syscall raises."""

    def syscall(
        self, syscall: Syscall, identity: Identity
    ) -> AbstractContextManager[SyscallSpan]: ...


class _Untraced:
    """The span of a handler without a tracer: nothing, at the cost of a call."""

    _phase = nullcontext()

    def phase(self, name: str) -> AbstractContextManager[object]:
        return self._phase

    def answered(self, result: SyscallResult) -> None:
        return None


_UNTRACED = _Untraced()


@dataclass(eq=False, kw_only=True)
class SyscallHandler:
    admission: AdmissionService
    effects: EffectDispatcher
    settlement: Settlement
    lease: InstanceLease
    clock: Clock
    production: bool = False
    observer: SyscallObserver | None = None
    tracer: SyscallTracer | None = None
    served_run: str | None = None
    """A per-turn instance's run (``arvis serve-turn RUN``): the only one it admits."""
    _admitting: bool = field(default=True, init=False)
    _in_flight: int = field(default=0, init=False)
    _idle: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        self._idle.set()

    async def handle(
        self,
        syscall: Syscall,
        identity: Identity,
        *,
        log_fields: MutableMapping[str, str] | None = None,
    ) -> SyscallResult:
        """Govern one ``tool.execute``. Raises only for what is not a governed outcome:
        another run than a per-turn instance serves, a refused identity, a run of
        another principal, a payload that is not JSON, an attempt in flight, no live
        lease, or an unavailable store or audit sink (in which case nothing ran).

        ``log_fields``: the caller's log line of this request (the access log's), to
        which the syscall adds its run id, causal id and outcome."""
        if log_fields is not None:
            log_fields["run_id"], log_fields["causal_id"] = syscall.run_id, syscall.causal_id
        started = time.perf_counter()
        subject = identity.subject_token
        try:
            # The caller's token, for tools with per-user credentials: beside the call,
            # never in it (arvis.tools.credentials).
            with caller_token(None if subject is None else subject.get_secret_value()):
                if self.tracer is None:
                    result = await self._handle(syscall, identity, _UNTRACED)
                else:
                    with self.tracer.syscall(syscall, identity) as span:
                        result = await self._handle(syscall, identity, span)
                        span.answered(result)
        except ArvisError as exc:
            code = exc.code
            self._safely(lambda observer: observer.observe_error(code))
            if log_fields is not None:
                log_fields["problem"] = exc.code
            raise
        elapsed = time.perf_counter() - started
        self._safely(lambda observer: observer.observe_syscall(result, elapsed))
        if log_fields is not None:
            log_fields["outcome"] = result.outcome
        return result

    async def _handle(
        self, syscall: Syscall, identity: Identity, span: SyscallSpan
    ) -> SyscallResult:
        if self.served_run is not None and syscall.run_id != self.served_run:
            raise RunNotServed(f"this instance serves the turn of run {self.served_run!r} only")
        if not self._admitting:
            raise ShuttingDown("this instance is shutting down; retry on another instance")
        if self.production and identity.method not in ("api_key", "oidc"):
            raise IdentityRefused(
                f"{identity.method} identities are refused when ARVIS_ENV=production"
            )
        if reserved_for_another(syscall.run_id, identity.principal_id):
            # A derived run id names its principal's run even before that run exists:
            # taking it first would bind it, and lock its principal out.
            raise RunOfAnotherPrincipal(syscall.run_id)
        payload = freeze_payload(syscall.decision.payload)
        owner = InstanceId(self.lease.require())
        ids = Ids(
            capability=CapabilityId(f"cap_{uuid.uuid4().hex}"),
            intent=IntentId(f"int_{uuid.uuid4().hex}"),
            confirmation=ConfirmationId(f"cnf_{uuid.uuid4().hex}"),
            recorded_at=self.clock.now(),
        )
        self._in_flight += 1
        self._idle.clear()
        try:
            clock = time.perf_counter
            started = clock()
            with span.phase("admission"):
                step = await self._run_to_end(
                    retry_transaction(
                        lambda: self.admission.admit(syscall, identity, payload, ids, owner)
                    )
                )
            admitted = clock()
            self._observe("admission", admitted - started)
            if isinstance(step, SyscallResult):
                return step
            return await self._dispatch_and_settle(step, admitted, span)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _dispatch_and_settle(
        self, step: Admitted, admitted: float, span: SyscallSpan
    ) -> SyscallResult:
        clock = time.perf_counter
        try:
            with span.phase("dispatch"):
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
        with span.phase("journal"):
            result = await self._run_to_end(self.settlement.settle(step, outcome))
        self._observe("journal", clock() - dispatched)
        if cancelled:
            span.answered(result)  # journaled, though nobody is waiting for it any more
            raise asyncio.CancelledError
        return result

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
        self._safely(lambda observer: observer.observe_phase(phase, seconds))

    def _safely(self, tell: Callable[[SyscallObserver], None]) -> None:
        if self.observer is not None:
            try:
                tell(self.observer)
            except Exception:  # telemetry must never fail a syscall
                log.exception("syscall observer failed")

    def stop_admitting(self) -> None:
        """Refuse new syscalls from now on (graceful shutdown, first step)."""
        self._admitting = False

    async def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait for in-flight syscalls to finish and journal, and for held results.

        True when everything settled in time. What does not is left to recovery,
        which journals it as uncertain: an interrupted effect is never dropped.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=timeout_s)
        except TimeoutError:
            return False
        return await self.settlement.drain(max(0.0, deadline - loop.time()))

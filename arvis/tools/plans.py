"""Tool plans (DESIGN §3): the immutable set of definitions a run is bound to.

A plan id is SHA-256 over the JCS array of its sorted definition fingerprints,
so changed definitions can never reuse an id. Plans are persisted through the
:class:`PlanStore` port so an auditor sees the definitions that were in force.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Protocol, Unpack

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import ArvisError, PayloadError
from arvis.domain.ids import PlanId
from arvis.domain.payload import FrozenEffectPayload, freeze_payload
from arvis.tools.base import Canonical, Reconcile, ToolInvocation
from arvis.tools.classify import not_started
from arvis.tools.errors import (
    CanonicalFormRefused,
    PlanError,
    PlanMismatch,
    PlanNotFound,
    PlanUnavailable,
)
from arvis.tools.layers import Dispatcher, DispatchOptions
from arvis.tools.outcome import DispatchOutcome

logger = logging.getLogger(__name__)


class PlanStore(Protocol):
    """Persistence port for plans; the SQL adapter lives in ``arvis.store``."""

    async def save_plan(self, plan_id: PlanId, definitions: Sequence[dict[str, Any]]) -> None:
        """Store ``definitions`` (``ToolDefinition.to_dict()`` each) under ``plan_id``.

        Idempotent: saving the same plan again is a no-op.
        """

    async def load_plan(self, plan_id: PlanId) -> list[dict[str, Any]] | None:
        """The stored definitions of ``plan_id``, or ``None`` when it was never saved."""


def derive_plan_id(definitions: Iterable[ToolDefinition]) -> PlanId:
    """SHA-256 hex over the JCS array of the definitions' sorted fingerprints."""
    return PlanId(sha256_hex(canonical_bytes(sorted(d.fingerprint for d in definitions))))


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """``plan_id`` + definitions + the dispatcher that runs them. Immutable."""

    plan_id: PlanId
    definitions: Mapping[str, ToolDefinition]
    dispatcher: Dispatcher

    def __post_init__(self) -> None:
        if derive_plan_id(self.definitions.values()) != self.plan_id:
            raise PlanMismatch(None, self.plan_id, "plan id does not match its definitions")
        object.__setattr__(
            self, "definitions", MappingProxyType(dict(sorted(self.definitions.items())))
        )

    def records(self) -> list[dict[str, Any]]:
        """The definitions as persisted: ``ToolDefinition.to_dict()``, sorted by name."""
        return [definition.to_dict() for definition in self.definitions.values()]

    def destination(self, tool: str) -> str | None:
        """The fixed URL ``tool`` reaches when this plan's dispatcher runs it, or None.

        Asked of the dispatcher, not the definitions: the URL is not part of a
        fingerprint, and a retired plan's tool runs with the current one's.
        """
        return dispatcher_destination(self.dispatcher, tool)

    def reconciler(self, tool: str) -> Reconcile | None:
        """``tool``'s reconcile hook when this plan's dispatcher would run it, or None."""
        lookup = getattr(self.dispatcher, "reconciler", None)
        hook = lookup(tool) if callable(lookup) else None
        return hook if callable(hook) else None

    def acted_on(self, tool: str, payload: FrozenEffectPayload) -> FrozenEffectPayload:
        """``payload`` in the form ``tool`` acts on, which policy decides on (DESIGN §10).

        The tool's ``canonical`` hook (:class:`~arvis.tools.base.Canonical`) when this
        plan's dispatcher would run it, else ``payload`` itself. Raises
        :class:`CanonicalFormRefused` when the hook refuses, fails, or answers what is
        not a payload.
        """
        hook = dispatcher_canonical(self.dispatcher, tool)
        return payload if hook is None else canonical_form(tool, hook, payload)


def canonical_form(tool: str, hook: Canonical, payload: FrozenEffectPayload) -> FrozenEffectPayload:
    """What ``hook`` makes of ``payload``, frozen; :class:`CanonicalFormRefused` otherwise."""
    try:
        value = hook(payload.value)
    except ArvisError as exc:
        # A typed refusal is written for the caller (a file tool's, say, names its code).
        raise CanonicalFormRefused(tool, f"{exc.message} ({exc.code})") from None
    except Exception:  # a hook is code we did not write: contained, its text not shown
        logger.exception("the canonical hook of tool %s failed", tool)
        raise CanonicalFormRefused(tool, "its canonical form could not be computed") from None
    try:
        return freeze_payload(value)
    except PayloadError as exc:
        logger.error("the canonical hook of tool %s answered no payload: %s", tool, exc.message)
        raise CanonicalFormRefused(tool, "its canonical form is not a payload") from None


def dispatcher_canonical(dispatcher: Dispatcher, tool: str) -> Canonical | None:
    """``dispatcher.canonicalizer(tool)`` when it offers one (see ``ToolDispatcher``)."""
    lookup = getattr(dispatcher, "canonicalizer", None)
    hook = lookup(tool) if callable(lookup) else None
    return hook if callable(hook) else None


def dispatcher_destination(dispatcher: Dispatcher, tool: str) -> str | None:
    """``dispatcher.destination(tool)`` when it offers one (see ``ToolDispatcher``), else None.

    A dispatcher without the lookup has no tool with a fixed destination as far
    as the egress gate knows: only its payload rule applies.
    """
    lookup = getattr(dispatcher, "destination", None)
    if not callable(lookup):
        return None
    destination = lookup(tool)
    return destination if isinstance(destination, str) else None


class PlanLease:
    """A plan leased to one run. :meth:`release` is idempotent and never blocks."""

    def __init__(self, plan: ToolPlan, on_release: Callable[[], None] | None = None) -> None:
        self.plan = plan
        self._on_release = on_release
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        if self._on_release is not None:
            try:
                self._on_release()
            except Exception:  # releasing must never fail its caller
                logger.exception("releasing tool plan %s failed", self.plan.plan_id)

    async def __aenter__(self) -> ToolPlan:
        return self.plan

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class ToolPlanSource(Protocol):
    """Leases a plan: the current one for a new run, or the exact id a run is bound to."""

    async def lease(self, plan_id: PlanId | None = None) -> PlanLease: ...


class RetiredPlanDispatcher:
    """The dispatcher of a persisted plan that is no longer current.

    A tool whose definition is unchanged in the current plan (same fingerprint)
    still runs through the current dispatcher; a tool that changed or left fails
    closed with ``plan_retired``, before any effect. Runs bound to the old plan
    therefore keep their definitions, and only ever run code that matches them.
    """

    def __init__(
        self, definitions: Mapping[str, ToolDefinition], current: Dispatcher | None = None
    ) -> None:
        self.definitions = definitions
        self._current = current

    def _runs_current(self, tool: str) -> Dispatcher | None:
        """The current dispatcher when it runs ``tool`` with the recorded definition."""
        wanted = self.definitions.get(tool)
        if self._current is None or wanted is None:
            return None
        live = self._current.definitions.get(tool)
        if live is None or live.fingerprint != wanted.fingerprint:
            return None
        return self._current

    def destination(self, tool: str) -> str | None:
        """The current dispatcher's destination for ``tool``: it is what will run it.

        None when the tool would fail closed with ``plan_retired`` instead.
        """
        current = self._runs_current(tool)
        return None if current is None else dispatcher_destination(current, tool)

    def reconciler(self, tool: str) -> Reconcile | None:
        """The current tool's hook, only while its definition is the one recorded."""
        current = self._runs_current(tool)
        lookup = None if current is None else getattr(current, "reconciler", None)
        hook = lookup(tool) if callable(lookup) else None
        return hook if callable(hook) else None

    def canonicalizer(self, tool: str) -> Canonical | None:
        """The current tool's ``canonical`` hook, likewise: the current tool is the one
        that will act."""
        current = self._runs_current(tool)
        return None if current is None else dispatcher_canonical(current, tool)

    async def dispatch(
        self, invocation: ToolInvocation, **options: Unpack[DispatchOptions]
    ) -> DispatchOutcome:
        current = self._runs_current(invocation.tool)
        if current is not None:
            return await current.dispatch(invocation, **options)
        return DispatchOutcome(failure=not_started("plan_retired"))


class StaticToolPlanSource:
    """One current plan built from a dispatcher; older plans come back from the store.

    The current plan is saved on its first lease, before any run can bind to it.
    """

    def __init__(self, dispatcher: Dispatcher, store: PlanStore | None = None) -> None:
        definitions = dispatcher.definitions
        self.current = ToolPlan(derive_plan_id(definitions.values()), definitions, dispatcher)
        self._store = store
        self._saved = False
        self._save_lock = asyncio.Lock()
        # Plans are immutable and their ids are digests: a loaded plan never goes stale.
        self._loaded: dict[PlanId, ToolPlan] = {}
        self.active_leases = 0

    async def lease(self, plan_id: PlanId | None = None) -> PlanLease:
        if plan_id is None or plan_id == self.current.plan_id:
            await self._save_current()
            return self._lease(self.current)
        return self._lease(await self._load(plan_id))

    def _lease(self, plan: ToolPlan) -> PlanLease:
        self.active_leases += 1
        return PlanLease(plan, self._released)

    def _released(self) -> None:
        self.active_leases -= 1

    async def _save_current(self) -> None:
        if self._saved or self._store is None:
            return
        async with self._save_lock:
            if not self._saved:
                await self._store.save_plan(self.current.plan_id, self.current.records())
                self._saved = True

    async def _load(self, plan_id: PlanId) -> ToolPlan:
        cached = self._loaded.get(plan_id)
        if cached is None:
            cached = self._loaded[plan_id] = await self._load_from_store(plan_id)
        return cached

    async def _load_from_store(self, plan_id: PlanId) -> ToolPlan:
        records = None if self._store is None else await self._store.load_plan(plan_id)
        if records is None:
            raise PlanNotFound(plan_id)
        try:
            loaded = [ToolDefinition.from_dict(record) for record in records]
        except (ArvisError, KeyError, TypeError) as exc:
            raise PlanMismatch(
                plan_id, plan_id, f"stored definitions do not verify: {exc}"
            ) from None
        definitions = {d.name: d for d in loaded}
        if derive_plan_id(definitions.values()) != plan_id:
            raise PlanMismatch(plan_id, plan_id, "stored definitions do not hash to the plan id")
        return ToolPlan(
            plan_id, definitions, RetiredPlanDispatcher(definitions, self.current.dispatcher)
        )


async def lease_plan(source: ToolPlanSource, plan_id: PlanId | None = None) -> PlanLease:
    """Lease through ``source`` and verify what came back.

    A source that raises is contained as :class:`PlanUnavailable` (its text is
    logged, not shown); a lease for another plan, or a plan whose id does not
    match its definitions, is released and refused with :class:`PlanMismatch`.
    """
    try:
        lease = await source.lease(plan_id)
    except PlanError:
        raise
    except Exception:
        logger.exception("tool plan source failed to lease %s", plan_id or "the current plan")
        raise PlanUnavailable(plan_id) from None
    try:
        got = lease.plan.plan_id
        # A ToolPlan verified its id against its definitions when it was built and
        # cannot change since; anything else a source hands back is verified here.
        if type(lease.plan) is ToolPlan:
            derived = got
        else:
            derived = derive_plan_id(lease.plan.definitions.values())
    except Exception:
        logger.exception("tool plan source returned an unreadable lease")
        _release_quietly(lease)
        raise PlanUnavailable(plan_id) from None
    if derived != got:
        _release_quietly(lease)
        raise PlanMismatch(plan_id, got, "plan id does not match its definitions")
    if plan_id is not None and got != plan_id:
        _release_quietly(lease)
        raise PlanMismatch(plan_id, got, "the source returned another plan")
    return lease


def _release_quietly(lease: PlanLease) -> None:
    try:
        lease.release()
    except Exception:  # a refused lease must not turn into a second failure
        logger.exception("releasing a refused tool plan lease failed")

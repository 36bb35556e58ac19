"""Resolving uncertain outcomes (issue 16): by a person, or by a tool's reconcile hook.

An attempt journaled ``EFFECT_STARTED`` or ``EFFECT_STATE_UNKNOWN`` stays uncertain
until someone finds out what happened and says so. A resolution is a journal entry
of its own (kind ``resolution``), appended after the entry it resolves, naming it by
position and hash, with who resolved it (a principal, from its authentication, or
``reconciler:<tool>``), when, the resolved boundary and the evidence. The uncertain
entry is never changed. Each attempt is resolved at most once (``arvis_resolve``
checks it under the run's lock), and the retry table then reads the resolved
boundary (:func:`arvis.lifecycle.authorization._apply_retry_table`).

Four eyes, as for consent (DESIGN §4): the principal whose call it was cannot
resolve it unless the deployment allows self-approval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.boundary import EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ArvisError, PayloadError
from arvis.domain.identity import Identity
from arvis.domain.ids import CallId, IdempotencyKey, PlanId, RunId, TenantId
from arvis.domain.journal import (
    RESOLVED_BOUNDARIES,
    Decider,
    ExecutionArtifact,
    RecoveryArtifact,
    ResolutionArtifact,
    ResolvedEntry,
)
from arvis.domain.payload import freeze_payload
from arvis.domain.sections import parse_section
from arvis.lifecycle.errors import AlreadyResolved, NotFound, NotUncertain, SelfResolution
from arvis.lifecycle.ports import JournalEntry, LifecycleStore, Resolution, UncertainAttempt
from arvis.tools.base import Reconciliation, ToolInvocation
from arvis.tools.plans import ToolPlanSource, lease_plan

log = logging.getLogger(__name__)

RESOLVED_AS = {
    "completed": EffectBoundary.EFFECT_COMPLETED,
    "failed": EffectBoundary.EFFECT_FAILED,
    "not_started": EffectBoundary.EFFECT_NOT_STARTED,
}
"""What a resolver may say an uncertain attempt did."""
MAX_EVIDENCE = 2000


class ResolutionService:
    """Resolves uncertain attempts, as one store step each (``arvis_resolve``)."""

    def __init__(
        self, store: LifecycleStore, clock: Clock, *, allow_self_resolution: bool = False
    ) -> None:
        self.store = store
        self.clock = clock
        self.allow_self_resolution = allow_self_resolution

    async def resolve(
        self,
        resolver: Identity,
        run_id: RunId,
        key: str,
        attempt: int,
        boundary: EffectBoundary,
        evidence: str,
    ) -> JournalEntry:
        """Journal ``resolver``'s resolution of an uncertain attempt of their tenant.

        :class:`NotFound` for no such attempt (another tenant's included),
        :class:`NotUncertain` for an attempt whose outcome is known,
        :class:`AlreadyResolved` for one resolved before, :class:`SelfResolution`
        for the caller's own call.
        """
        found = await self.uncertain(resolver.tenant_id, run_id, key, attempt)
        requested_by = _requested_by(found.entry)
        if not self.allow_self_resolution and resolver.same_principal(
            found.entry.tenant_id, requested_by
        ):
            raise SelfResolution(
                "the principal whose call it was may not resolve it; another operator must"
            )
        decider = Decider(
            principal_id=resolver.principal_id,
            auth_method=resolver.method,
            key_id=resolver.key_id,
            groups=list(resolver.groups) or None,
        )
        return await self.write(found, decider, boundary, evidence)

    async def uncertain(
        self, tenant_id: TenantId, run_id: RunId, key: str, attempt: int
    ) -> UncertainAttempt:
        async with self.store.reading() as reads:
            found = await reads.uncertain(tenant_id, run_id, key, attempt)
            settled = (
                None
                if found is not None
                else await reads.attempt_entry(tenant_id, run_id, key, attempt)
            )
        if found is None:
            if settled is None:
                raise NotFound(f"no attempt {attempt} of {key} in run {run_id}")
            raise NotUncertain(f"attempt {attempt} ended {settled.boundary}: its outcome is known")
        if found.resolved is not None:
            raise AlreadyResolved(f"attempt {attempt} was resolved already as {found.resolved}")
        return found

    async def write(
        self,
        found: UncertainAttempt,
        decider: Decider,
        boundary: EffectBoundary,
        evidence: str,
    ) -> JournalEntry:
        """Append the resolution (the one write of this step)."""
        if boundary not in RESOLVED_BOUNDARIES:
            raise NotUncertain(f"an attempt cannot be resolved as {boundary}")
        entry = found.entry
        assert entry.attempt is not None
        assert entry.boundary is not None
        artifact = ResolutionArtifact(
            tool=_tool(entry),
            attempt=entry.attempt,
            resolves=ResolvedEntry(
                position=entry.position,
                entry_hash=entry.entry_hash,
                boundary=EffectBoundary(entry.boundary),
            ),
            boundary=boundary,
            resolved_by=decider,
            evidence=evidence[:MAX_EVIDENCE],
            requested_by=_requested_by(entry),
        )
        answer = await self.store.resolve(
            Resolution(
                tenant_id=entry.tenant_id,
                run_id=entry.run_id,
                causal_id=entry.causal_id,
                idempotency_key=entry.idempotency_key,
                attempt=entry.attempt,
                uncertain_position=entry.position,
                artifact=artifact,
                resolved_by=f"{decider.principal_id} ({decider.auth_method}:"
                f"{decider.key_id or '-'})",
                recorded_at=self.clock.now(),
            )
        )
        if answer.status == "appended":
            assert answer.entry is not None
            return answer.entry
        if answer.status == "resolved":
            raise AlreadyResolved(f"attempt {entry.attempt} was resolved already")
        raise NotUncertain(f"attempt {entry.attempt} is not uncertain")


class ReconcileSettings(BaseModel):
    """The ``[reconcile]`` section: how often the sweeper asks the hooks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_asks: int = Field(default=5, ge=0, le=100)
    """Asks per uncertain attempt before only a person can resolve it (0: never ask)."""
    backoff_s: float = Field(default=30.0, gt=0, le=24 * 3600)
    """The wait after an ask that said nothing definite; doubled each time."""
    max_backoff_s: float = Field(default=3600.0, gt=0, le=7 * 24 * 3600)
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    """How long one hook may take to answer."""


def parse_reconcile_config(raw: Mapping[str, Any]) -> ReconcileSettings:
    return parse_section(ReconcileSettings, raw, "[reconcile]")


_NO_HOOK_RECHECK_S = 24 * 3600.0


class Reconciler:
    """Asks tools' reconcile hooks about uncertain attempts still open (issue 16).

    A definite answer is journaled as a resolution by ``reconciler:<tool>``; a hook
    that fails, times out or says ``unknown`` changes nothing but the time of the
    next ask (backoff, at most ``max_asks`` asks).
    """

    def __init__(
        self,
        store: LifecycleStore,
        plans: ToolPlanSource,
        resolutions: ResolutionService,
        settings: ReconcileSettings | None = None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.resolutions = resolutions
        self.settings = settings or ReconcileSettings()

    async def sweep(self, *, limit: int = 100) -> int:
        """Ask about every open uncertain attempt that is due; answer how many resolved."""
        due = await self.store.open_uncertain(limit=limit, max_asks=self.settings.max_asks)
        resolved = 0
        for found in due:
            if await self.ask(found):
                resolved += 1
        return resolved

    async def ask(self, found: UncertainAttempt) -> bool:
        entry = found.entry
        assert entry.attempt is not None
        answer = await self._answer(found)
        if answer is not None and answer.outcome != "unknown":
            tool = _tool(entry)
            try:
                await self.resolutions.write(
                    found,
                    Decider(principal_id=f"reconciler:{tool}", auth_method="reconciler"),
                    RESOLVED_AS[answer.outcome],
                    answer.evidence or f"{tool}'s reconcile hook answered {answer.outcome}",
                )
                return True
            except (AlreadyResolved, NotUncertain):
                return False  # a person was quicker
        delay = (
            _NO_HOOK_RECHECK_S
            if answer is None
            else min(self.settings.backoff_s * 2**found.asks, self.settings.max_backoff_s)
        )
        await self.store.record_ask(
            TenantId(entry.tenant_id), entry.idempotency_key, entry.attempt, delay
        )
        return False

    async def _answer(self, found: UncertainAttempt) -> Reconciliation | None:
        """The hook's answer; None when the tool has no hook (or it is not the same tool)."""
        entry = found.entry
        artifact = entry.artifact
        if not isinstance(artifact, ExecutionArtifact | RecoveryArtifact):
            return None
        if artifact.plan_id is None or artifact.context is None:
            return None
        try:
            lease = await lease_plan(self.plans, PlanId(artifact.plan_id))
        except ArvisError as exc:
            log.warning("cannot reconcile %s: %s", entry.idempotency_key, exc.message)
            return None
        try:
            hook = lease.plan.reconciler(artifact.tool)
            if hook is None:
                return None
            invocation = _invocation(found, artifact.tool, artifact.context)
            if invocation is None:
                return None
            try:
                said = await asyncio.wait_for(hook(invocation), self.settings.timeout_s)
                return said if isinstance(said, Reconciliation) else Reconciliation(outcome=said)
            except Exception as exc:  # a hook is code we did not write: it changes nothing
                log.warning(
                    "the reconcile hook of %s failed (%s); asking again later",
                    artifact.tool,
                    type(exc).__name__,
                )
                return Reconciliation(outcome="unknown")
        finally:
            lease.release()


def _invocation(
    found: UncertainAttempt, tool: str, context: AuthorizedEffectContext
) -> ToolInvocation | None:
    """The original invocation: same payload, context, idempotency key and call id."""
    entry = found.entry
    try:
        payload = freeze_payload(found.payload)
    except PayloadError:
        return None
    if entry.intent_id is None:
        return None
    return ToolInvocation(
        tool=tool,
        payload=payload,
        context=context,
        idempotency_key=IdempotencyKey(entry.idempotency_key),
        call_id=CallId(entry.intent_id),
    )


def _tool(entry: JournalEntry) -> str:
    artifact = entry.artifact
    return str(getattr(artifact, "tool", ""))


def _requested_by(entry: JournalEntry) -> str:
    context = getattr(entry.artifact, "context", None)
    return "" if context is None else str(context.principal_id)

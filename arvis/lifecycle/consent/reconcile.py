"""Asking tools' reconcile hooks about uncertain attempts (issue 16).

The machine's half of resolving uncertain outcomes: a sweep finds the attempts still
open, asks the tool's reconcile hook what happened (bounded in time and in asks), and
writes a definite answer through the same :class:`ResolutionService` a person's
resolution goes through, as ``reconciler:<tool>``. The rules of a resolution live
there (:mod:`arvis.lifecycle.consent.resolution`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ArvisError, PayloadError
from arvis.domain.ids import CallId, IdempotencyKey, PlanId, TenantId
from arvis.domain.journal import (
    Decider,
    ExecutionArtifact,
    RecoveryArtifact,
)
from arvis.domain.payload import freeze_payload
from arvis.domain.sections import parse_section
from arvis.lifecycle.consent.resolution import RESOLVED_AS, ResolutionService, tool_of
from arvis.lifecycle.errors import (
    AlreadyResolved,
    ConfirmationStateConflict,
    NotUncertain,
)
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import UncertainAttempt
from arvis.tools.base import Reconciliation, ToolInvocation
from arvis.tools.plans import ToolPlanSource, lease_plan

log = logging.getLogger(__name__)


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


@dataclass(eq=False)
class Reconciler:
    """Asks tools' reconcile hooks about uncertain attempts still open (issue 16).

    A definite answer is journaled as a resolution by ``reconciler:<tool>``; a hook
    that fails, times out or says ``unknown`` changes nothing but the time of the
    next ask (backoff, at most ``max_asks`` asks). A hook's ``not_started`` of an
    attempt that ran under consent opens the consent's next round with no approval:
    a machine's word is not a person's consent (module docstring).
    """

    store: LifecycleStore
    plans: ToolPlanSource
    resolutions: ResolutionService
    settings: ReconcileSettings = field(default_factory=ReconcileSettings)

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
            tool = tool_of(entry)
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
            except ConfirmationStateConflict:
                pass  # the decision kept moving: ask again later
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

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

Settling an uncertain outcome meets the consent terms (DESIGN §10). Of the three
answers only ``not_started`` allows another execution (``completed`` dedupes,
``failed`` refuses a retry). An attempt that ran under consent used that consent up;
when it is resolved as not started, the consent opens a new round of approval under
the terms frozen when it was asked (approver groups, quorum, four eyes, a fresh
expiry), in the same store step as the resolution, so the next attempt waits for
those terms to be met again. The resolver's word counts as one approval of the new
round when the resolver could have approved it; a reconcile hook's word never does
(a machine's answer is not a person's consent). With a quorum of one, a resolver who
could have approved leaves the consent APPROVED at once: the next attempt reserves
it like any approved consent.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta

from arvis.domain.boundary import RESOLVED_BOUNDARIES, EffectBoundary
from arvis.domain.clock import Clock
from arvis.domain.identity import Identity
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.domain.journal import (
    ConsentRound,
    Decider,
    ResolutionArtifact,
    ResolvedEntry,
)
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.errors import (
    AlreadyResolved,
    ConfirmationStateConflict,
    NotFound,
    NotUncertain,
    SelfResolution,
)
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import ConfirmationRecord, JournalEntry, UncertainAttempt
from arvis.lifecycle.writes import ConsentRenewal, Resolution

log = logging.getLogger(__name__)

RESOLVED_AS = {
    "completed": EffectBoundary.EFFECT_COMPLETED,
    "failed": EffectBoundary.EFFECT_FAILED,
    "not_started": EffectBoundary.EFFECT_NOT_STARTED,
}
"""What a resolver may say an uncertain attempt did."""
MAX_EVIDENCE = 2000
# A renewal is decided on the consent and the attempts read; a concurrent attempt or
# renewal makes the read stale, and the resolution is decided again on the fresh one.
_ROUNDS = 4
_DEFAULT_TTL_S = 24 * 3600.0


@dataclass(eq=False)
class ResolutionService:
    """Resolves uncertain attempts, as one store step each (``arvis_resolve``)."""

    store: LifecycleStore
    clock: Clock
    _: KW_ONLY
    allow_self_resolution: bool = False
    confirmation_ttl_s: float = _DEFAULT_TTL_S

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
        requested = requested_by(found.entry)
        if not self.allow_self_resolution and resolver.took_part(
            found.entry.tenant_id, requested, acted_by(found.entry)
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
        return await self.write(found, decider, boundary, evidence, resolver=resolver)

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
        *,
        resolver: Identity | None = None,
    ) -> JournalEntry:
        """Append the resolution (the one write of this step), with the consent's next
        round when it allows another execution of a consented action.

        ``resolver`` is the person resolving (None: a reconcile hook); only a person
        who could have approved the consent counts as an approval of its new round.
        """
        if boundary not in RESOLVED_BOUNDARIES:
            raise NotUncertain(f"an attempt cannot be resolved as {boundary}")
        entry = found.entry
        assert entry.attempt is not None
        assert entry.boundary is not None
        resolved_by = f"{decider.principal_id} ({decider.auth_method}:{decider.key_id or '-'})"
        for _ in range(_ROUNDS):
            recorded_at = self.clock.now()
            renewal = await self._renewal(found, boundary, decider, resolver, resolved_by)
            artifact = ResolutionArtifact(
                tool=tool_of(entry),
                attempt=entry.attempt,
                resolves=ResolvedEntry(
                    position=entry.position,
                    entry_hash=entry.entry_hash,
                    boundary=EffectBoundary(entry.boundary),
                ),
                boundary=boundary,
                resolved_by=decider,
                evidence=evidence[:MAX_EVIDENCE],
                requested_by=requested_by(entry),
                requested_actor=acted_by(entry),
                consent=None if renewal is None else _round(renewal),
            )
            answer = await self.store.resolve(
                Resolution(
                    key=entry.key,
                    uncertain_position=entry.position,
                    artifact=artifact,
                    resolved_by=resolved_by,
                    recorded_at=recorded_at,
                    renewal=renewal,
                )
            )
            if answer.status == "appended":
                assert answer.entry is not None
                return answer.entry
            if answer.status == "resolved":
                raise AlreadyResolved(f"attempt {entry.attempt} was resolved already")
            if answer.status == "not_uncertain":
                raise NotUncertain(f"attempt {entry.attempt} is not uncertain")
            # stale: the consent or the decision's attempts changed since they were read.
        raise ConfirmationStateConflict(
            f"the consent of attempt {entry.attempt} kept changing; resolve it again"
        )

    async def _renewal(
        self,
        found: UncertainAttempt,
        boundary: EffectBoundary,
        decider: Decider,
        resolver: Identity | None,
        resolved_by: str,
    ) -> ConsentRenewal | None:
        """The consent's next round, when this resolution would otherwise let another
        attempt run under a consent the resolved attempt used up; else None."""
        entry = found.entry
        assert entry.attempt is not None
        confirmation_id = getattr(entry.artifact, "confirmation_id", None)
        if boundary is not EffectBoundary.EFFECT_NOT_STARTED or confirmation_id is None:
            return None
        history = await self.store.history(
            TenantId(entry.tenant_id),
            RunId(entry.run_id),
            entry.causal_id,
            IdempotencyKey(entry.idempotency_key),
        )
        consent = history.confirmation
        if (
            consent is None
            or consent.confirmation_id != confirmation_id
            or consent.state is not ConfirmationState.CONSUMED
        ):
            # Waiting, approved, denied, expired or reserved: the next attempt meets the
            # consent as it stands, which only a used-up one would not ask for.
            return None
        latest = history.latest
        if history.in_flight is not None or (latest is not None and latest.attempt > entry.attempt):
            # A later attempt exists: the retry table reads that one, not this.
            return None
        counts = resolver is not None and self._may_approve(resolver, consent)
        approved = counts and consent.quorum <= 1
        return ConsentRenewal(
            confirmation=consent,
            round=consent.round + 1,
            to_state=ConfirmationState.APPROVED if approved else ConfirmationState.PENDING,
            expires_at=self.clock.now() + self._ttl(consent),
            approver=decider if counts else None,
            decided_by=resolved_by if approved else None,
        )

    def _may_approve(self, resolver: Identity, consent: ConfirmationRecord) -> bool:
        """Whether ``resolver`` could approve ``consent`` (the approve route's rules)."""
        return (
            resolver.has_role("approver")
            and resolver.in_any_group(consent.approver_groups)
            and (
                self.allow_self_resolution
                or not resolver.took_part(
                    consent.tenant_id, consent.requested_by, consent.requested_actor
                )
            )
        )

    def _ttl(self, consent: ConfirmationRecord) -> timedelta:
        """The consent's time to live, as its terms gave it when it was asked."""
        ttl = consent.expires_at - (consent.renewed_at or consent.created_at)
        return ttl if ttl > timedelta(0) else timedelta(seconds=self.confirmation_ttl_s)


def _round(renewal: ConsentRenewal) -> ConsentRound:
    return ConsentRound(
        confirmation_id=renewal.confirmation.confirmation_id,
        round=renewal.round,
        state=renewal.to_state,
        approvals=0 if renewal.approver is None else 1,
        quorum=renewal.confirmation.quorum,
    )


def tool_of(entry: JournalEntry) -> str:
    artifact = entry.artifact
    return str(getattr(artifact, "tool", ""))


def requested_by(entry: JournalEntry) -> str:
    context = getattr(entry.artifact, "context", None)
    return "" if context is None else str(context.principal_id)


def acted_by(entry: JournalEntry) -> str | None:
    """The agent that made the call for its principal, when one did."""
    context = getattr(entry.artifact, "context", None)
    return None if context is None else context.actor_id

"""What the lifecycle's store answers when it is read (DESIGN §2): runs, confirmations,
journal entries, a decision's history, attempts in flight or uncertain, budgets.

The protocols that answer them are :mod:`arvis.lifecycle.ports`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from arvis.domain.attempt import AttemptKey
from arvis.domain.authorization import ConsentPolicy
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import (
    CapabilityId,
    ConfirmationId,
    IdempotencyKey,
    IntentId,
    PlanId,
    RunId,
    TenantId,
)
from arvis.domain.journal import (
    JournalArtifact,
    JournalKind,
    read_artifact,
)
from arvis.domain.states import ConfirmationState


@dataclass(frozen=True, slots=True)
class RunRecord:
    tenant_id: TenantId
    run_id: RunId
    plan_id: PlanId
    journal_length: int
    journal_head: str
    audit_incomplete: bool
    principal_id: str | None = None
    """The principal the run is bound to (revision 0010; None: a run from before it
    that recorded no principal anywhere, bound by its next syscall)."""
    evidence_broken_at: int | None = None
    """The first position at which the run's evidence was found broken (issue 23);
    None: nothing was found. Served answers of a flagged run are refused."""
    evidence_fault: str | None = None
    """What was found there, by whom and when."""


@dataclass(frozen=True, slots=True)
class Approval:
    """One approver's approval of a confirmation, from its authentication."""

    principal_id: str
    auth_method: str
    key_id: str | None
    groups: tuple[str, ...]
    decided_at: datetime
    position: int
    """The journal entry that records it."""


@dataclass(frozen=True, slots=True)
class ConfirmationRecord:
    confirmation_id: ConfirmationId
    tenant_id: TenantId
    run_id: RunId
    causal_id: str
    idempotency_key: IdempotencyKey
    tool: str
    payload: Any
    state: ConfirmationState
    context: dict[str, Any]
    decided_by: str | None
    decision_reason: str | None
    decided_at: datetime | None
    expires_at: datetime
    created_at: datetime
    approver_groups: tuple[str, ...] = ()
    """Groups one of which an approver's key must hold (empty: any approver)."""
    quorum: int = 1
    definition_fingerprint: str | None = None
    """The tool's definition when consent was asked (None: asked before revision 0006)."""
    policy_digest: str | None = None
    policy: ConsentPolicy | None = None
    """Which policy asked for the consent, and why: its engine, rule ids and reason (None:
    asked before revision 0018)."""
    approvals: tuple[Approval, ...] = ()
    """The approvals of the current round."""
    round: int = 1
    """The round of approval: a resolution as not started of an attempt that used the
    consent up opens the next one (revision 0010)."""
    renewed_at: datetime | None = None
    """When the current round opened, from the second round on."""
    read_at: datetime | None = None
    """The database's clock when the store read this record (None: built, not read):
    expiry is judged by it (:func:`arvis.domain.states.consent_expired`)."""
    payload_digest: str | None = None
    """The frozen payload's digest (None: built, not read). ``payload`` is what the
    record keeps: without the fields ``[journal] redact`` names, so its own digest
    differs from this one when the rule applied."""

    @property
    def key(self) -> AttemptKey:
        """The decision the consent is for (no attempt: it covers the decision)."""
        return AttemptKey(self.tenant_id, self.run_id, self.causal_id, self.idempotency_key)

    @property
    def requested_by(self) -> str:
        """The principal the consent was asked for (sealed in its context)."""
        return str(self.context.get("principal_id", ""))

    @property
    def requested_actor(self) -> str | None:
        """The agent that asked for the consent for its principal, when one did."""
        actor = self.context.get("actor")
        return str(actor["principal_id"]) if isinstance(actor, dict) else None

    def requested_for(self, tenant_id: str, principal_id: str, actor_id: str | None) -> bool:
        """True when this consent was asked by that principal of that tenant, through that
        actor (None: the principal itself).

        Consent is bound to its requester in every state (DESIGN §4), and to both halves
        of an agent acting for a person: another agent for the same person, or the same
        agent for another person, is not its requester (DESIGN §7).
        """
        return (
            str(self.context.get("tenant_id", "")) == tenant_id
            and self.requested_by == principal_id
            and self.requested_actor == actor_id
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    tenant_id: TenantId
    run_id: RunId
    position: int
    kind: JournalKind
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: EffectBoundary | None
    body_text: str
    """The canonical (RFC 8785) body, byte for byte what the chain hashes."""
    prev_hash: str
    entry_hash: str
    recorded_at: datetime

    def __post_init__(self) -> None:
        # Rows read back carry the columns' text; the entry holds the domain's enums
        # (equal to that text, so hashing and comparing are unchanged).
        if type(self.kind) is not JournalKind:
            object.__setattr__(self, "kind", JournalKind(self.kind))
        if self.boundary is not None and type(self.boundary) is not EffectBoundary:
            object.__setattr__(self, "boundary", EffectBoundary(self.boundary))

    @classmethod
    def placed(
        cls,
        key: AttemptKey,
        kind: JournalKind,
        intent_id: str | None,
        boundary: EffectBoundary | None,
        *,
        position: int,
        prev_hash: str,
        entry_hash: str,
        body_text: str,
        recorded_at: datetime,
    ) -> JournalEntry:
        """The entry a step appended about ``key``, where the chain placed it."""
        return cls(
            key.tenant_id,
            key.run_id,
            position,
            kind,
            key.causal_id,
            key.idempotency_key,
            key.attempt,
            intent_id,
            boundary,
            body_text,
            prev_hash,
            entry_hash,
            recorded_at,
        )

    @property
    def key(self) -> AttemptKey:
        """The attempt the entry is about (``attempt`` None: its decision's)."""
        return AttemptKey(
            self.tenant_id, self.run_id, self.causal_id, self.idempotency_key, self.attempt
        )

    @property
    def body(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body_text)
        return loaded

    @property
    def artifact(self) -> JournalArtifact:
        """The typed value of the body (arvis.domain.journal)."""
        return read_artifact(self.kind, self.body_text)


ChainRow = tuple[int, str, str, str, str, str, int | None, str | None, str | None, datetime, str]
"""(position, prev_hash, entry_hash, kind, causal_id, idempotency_key, attempt,
intent_id, boundary, recorded_at, body_text)"""


@dataclass(frozen=True, slots=True)
class LatestAttempt:
    """The last journaled attempt of a decision: what the retry table reads."""

    attempt: int
    boundary: EffectBoundary
    retryable: bool
    position: int
    resolved: EffectBoundary | None = None
    """What a resolution says the attempt did, when it was uncertain and resolved."""
    resolution_position: int | None = None
    plan_id: PlanId | None = None
    """The plan the attempt was decided under (its tool's definition is that plan's)."""


@dataclass(frozen=True, slots=True)
class DecisionHistory:
    """What the store knows of one decision, for Python to decide on (DESIGN §4)."""

    bound_key: IdempotencyKey | None
    """The decision the run's causal id names, or None when it names none yet."""
    latest: LatestAttempt | None
    in_flight: int | None
    """The attempt number in flight, if any."""
    confirmation: ConfirmationRecord | None
    read_at: datetime | None = None
    """The database's clock when this was read: expiry is judged by it too."""
    owner: str | None = None
    """The principal the run is bound to (None: no such run yet, or a run from before
    revision 0010 not bound yet). A run's binding never changes once made."""

    @property
    def next_attempt(self) -> int:
        last = max(self.latest.attempt if self.latest else 0, self.in_flight or 0)
        return last + 1


NEW_DECISION = DecisionHistory(bound_key=None, latest=None, in_flight=None, confirmation=None)
"""The history admission assumes first: the common case, checked by the store."""


@dataclass(frozen=True, slots=True)
class InFlightAttempt:
    """An attempt whose result was never journaled, as recovery finds it."""

    tenant_id: TenantId
    idempotency_key: IdempotencyKey
    attempt: int
    run_id: RunId
    causal_id: str
    tool: str
    plan_id: PlanId
    intent_id: IntentId
    capability_id: CapabilityId
    commitment: str
    receipt_position: int
    context: dict[str, Any]
    owner: str
    confirmation_id: ConfirmationId | None
    admitted_at: datetime
    started: bool
    """The tool durably reported that its effect started."""
    payload_digest: str
    policy: dict[str, Any] | None = None
    """The :class:`PolicyRecord` of the decision that admitted it (revision 0007 on)."""

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(
            self.tenant_id, self.run_id, self.causal_id, self.idempotency_key, self.attempt
        )


# -- the write steps ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UncertainAttempt:
    """An attempt journaled uncertain, and whether it is resolved yet."""

    entry: JournalEntry
    """The uncertain entry (never changed)."""
    resolved: EffectBoundary | None
    resolution_position: int | None
    asks: int
    payload: Any
    """The decision's frozen payload (a reconcile hook is asked with it)."""


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """One window of one budget, for one scope of a tenant."""

    budget: str
    scope_key: str
    window_start: datetime
    used: Decimal


RunStatus = Literal["audit_incomplete", "uncertain", "waiting_for_consent", "refused", "running"]
"""What a list of runs calls a run, first what needs a person (:mod:`arvis.lifecycle.runs`)."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as a list of runs shows it (``GET /v1/runs``, the console, ``arvis runs``)."""

    run_id: RunId
    created_at: datetime
    entries: int
    last_activity: datetime | None
    """When the run last did something: its latest journal entry, or a decision asked
    for since (a call waiting for consent journals nothing). None: nothing yet."""
    audit_incomplete: bool
    waiting: int
    """Confirmations of the run still waiting for consent (PENDING)."""
    uncertain: int
    """Uncertain attempts of the run not resolved yet."""
    status: RunStatus = "running"
    """What needs a person first, the first that holds (``arvis.lifecycle.runs``):
    ``audit_incomplete`` (an effect's result could not be journaled), ``uncertain`` (an
    uncertain attempt nobody has resolved), ``waiting_for_consent`` (a confirmation still
    PENDING), ``refused`` (its latest entry is a refusal), else ``running``: nothing of
    the above, which includes a run whose calls all ended (ARVIS is not told when an
    agent's run is over)."""
    principal: str | None = None
    """The principal the run is bound to (the person, when an agent acted for one)."""
    tools: tuple[str, ...] = ()
    """The tools the run asked for, by name."""
    actors: tuple[str, ...] = ()
    """The agents that acted for the principal in the run's calls, by principal id,
    sorted; empty: the principal made every call itself (issue 26)."""

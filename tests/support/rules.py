"""Fakes for the pure rules of admission (DESIGN §4): no database, and no tool ever runs.

:meth:`ToolAuthorizationService.decide` is a function of an :class:`AdmissionRequest` and
the :class:`DecisionHistory` the store would answer for it. This module builds both: a
fixed clock, identities, a plan with one tool of each kind the rules tell apart, the
policy that governs it, and :class:`History`, a builder of what the store knows of one
decision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.identity import Actor, AuthMethod, Identity
from arvis.domain.ids import (
    CausalId,
    ConfirmationId,
    IdempotencyKey,
    InstanceId,
    PrincipalId,
    RunId,
    TenantId,
)
from arvis.domain.payload import freeze_payload
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.policy.budgets import BudgetConfig, Budgets
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy, TenantRules
from arvis.lifecycle.records import ConfirmationRecord, DecisionHistory, LatestAttempt
from arvis.lifecycle.steps import AdmissionRequest
from arvis.tools.base import Reporter, ToolInvocation, ToolResult
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import ToolPlan, derive_plan_id
from tests.support.fakes import FakeTool

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
INSTANCE = InstanceId("instance-1/0")
RUN = RunId("run-1")
CAUSE = CausalId("cause-1")


class FixedClock:
    """A :class:`arvis.domain.clock.Clock` that says :data:`NOW` unless moved."""

    def __init__(self, moment: datetime = NOW) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


def _identity(tenant: str, principal: str, key_id: str) -> Identity:
    return Identity(
        tenant_id=TenantId(tenant),
        principal_id=PrincipalId(principal),
        method="api_key",
        key_id=key_id,
        roles=("agent",),
    )


AGENT = _identity("acme", "agent-7", "k_agent")
"""The principal every request comes from unless a test says otherwise."""
OTHER_AGENT = _identity("acme", "agent-9", "k_other")
"""Another principal of the same tenant."""
FOREIGN_AGENT = _identity("globex", "agent-7", "k_foreign")
"""A principal of another tenant that happens to share AGENT's principal id."""

# One tool of each kind the rules tell apart.
READ = "notes.read"
"""read-only, replay-safe."""
PUT = "ledger.put"
"""mutating, idempotent; its schema wants an integer ``amount``."""
SEND = "payments.send"
"""mutating, unsafe: needs consent under the default rule."""
POST = "webhook.post"
"""mutating, idempotent, ``network.access``: the egress gate reads its payload's url."""
ROTATE = "keys.rotate"
"""mutating, idempotent, and on the policy's consent list."""
PURGE = "archive.purge"
"""denied by policy."""
SHELL = "shell.run"
"""needs ``process.execute``, which the policy does not lift."""


def _definition(
    name: str,
    effect: Effect,
    replay_safety: ReplaySafety,
    *,
    capabilities: tuple[str, ...] = (),
    schema: dict[str, Any] | None = None,
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name}, a tool for rule tests",
        input_schema=schema or {"type": "object"},
        effect=effect,
        replay_safety=replay_safety,
        capabilities=capabilities,
    )


DEFINITIONS = {
    definition.name: definition
    for definition in (
        _definition(READ, Effect.READ_ONLY, ReplaySafety.SAFE),
        _definition(
            PUT,
            Effect.MUTATING,
            ReplaySafety.IDEMPOTENT,
            schema={
                "type": "object",
                "properties": {"amount": {"type": "integer"}},
                "required": ["amount"],
            },
        ),
        _definition(SEND, Effect.MUTATING, ReplaySafety.UNSAFE),
        _definition(
            POST,
            Effect.MUTATING,
            ReplaySafety.IDEMPOTENT,
            capabilities=("network.access",),
            schema={
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        ),
        _definition(ROTATE, Effect.MUTATING, ReplaySafety.IDEMPOTENT),
        _definition(PURGE, Effect.MUTATING, ReplaySafety.IDEMPOTENT),
        _definition(SHELL, Effect.MUTATING, ReplaySafety.UNSAFE, capabilities=("process.execute",)),
    )
}

PAYLOADS: dict[str, Any] = {
    READ: {"note": "n-1"},
    PUT: {"amount": 5},
    SEND: {"to": "acct-9", "cents": 500},
    POST: {"url": "https://api.example.com/hook"},
    ROTATE: {"key": "db"},
    PURGE: {"older_than_days": 30},
    SHELL: {"cmd": "ls"},
}
"""A payload each tool's schema and the policy accept."""


async def _never_runs(invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
    raise AssertionError("deciding runs no tool")


PLAN = ToolPlan(
    plan_id=derive_plan_id(DEFINITIONS.values()),
    definitions=DEFINITIONS,
    dispatcher=ToolDispatcher(FakeTool(d, _never_runs) for d in DEFINITIONS.values()),
)

POLICY = RulePolicy(
    PolicyConfig(
        version="rules-test",
        default=TenantRules(
            deny_tools=[PURGE], egress_hosts=["api.example.com"], consent_tools=[ROTATE]
        ),
    )
)


BUDGETS = Budgets(
    [
        BudgetConfig.model_validate(
            {"name": "puts", "limit": 20, "per": "1d", "tools": [PUT], "scope": ["principal"]}
        ),
        BudgetConfig.model_validate(
            {"name": "amounts", "limit": "500.00", "per": "1h", "tools": [PUT], "field": "amount"}
        ),
    ]
)
"""Two budgets on :data:`PUT`: its calls per principal per day, and its ``amount`` per hour."""


def authorization(
    clock: FixedClock | None = None, budgets: Budgets | None = None
) -> ToolAuthorizationService:
    """The real service on :data:`POLICY` and a fixed clock (and ``budgets``, if any)."""
    return ToolAuthorizationService(POLICY, clock or FixedClock(), budgets)


def request(
    tool: str = PUT,
    payload: Any = None,
    *,
    identity: Identity = AGENT,
    plan: ToolPlan | None = PLAN,
    causal_id: str = CAUSE,
) -> AdmissionRequest:
    """A ``tool.execute`` of ``tool`` in run :data:`RUN`; ``plan=None``: it cannot be leased."""
    return AdmissionRequest(
        identity=identity,
        run_id=RUN,
        causal_id=CausalId(causal_id),
        tool=tool,
        payload=freeze_payload(PAYLOADS.get(tool, {}) if payload is None else payload),
        plan=plan,
        plan_id=PLAN.plan_id,
        instance_id=INSTANCE,
    )


def sealed_context(request: AdmissionRequest, identity: Identity) -> AuthorizedEffectContext:
    """The context admission seals for ``identity`` posting ``request``."""
    return AuthorizedEffectContext(
        tenant_id=identity.tenant_id,
        principal_id=identity.principal_id,
        auth_method=identity.method,
        key_id=identity.key_id,
        roles=identity.roles,
        issuer=identity.issuer,
        actor=identity.actor,
        run_id=request.run_id,
        causal_id=request.causal_id,
        plan_id=request.plan_id,
        instance_id=request.instance_id,
    )


def confirmation(
    request: AdmissionRequest,
    state: ConfirmationState,
    *,
    requested_by: Identity = AGENT,
    expires_at: datetime = NOW + timedelta(hours=1),
    asked_for: tuple[str, str] | None = None,
    reason: str | None = None,
) -> ConfirmationRecord:
    """The consent for ``request``'s decision, asked by ``requested_by``.

    ``asked_for`` is the (definition fingerprint, policy digest) it was asked under;
    None: those in force now (revision 0006 records them)."""
    if asked_for is None and request.plan is not None and request.tool in request.plan.definitions:
        asked_for = (request.plan.definitions[request.tool].fingerprint, POLICY.digest)
    decided = state not in (ConfirmationState.PENDING, ConfirmationState.EXPIRED)
    return ConfirmationRecord(
        confirmation_id=ConfirmationId("cf_1"),
        tenant_id=requested_by.tenant_id,
        run_id=request.run_id,
        causal_id=request.causal_id,
        idempotency_key=request.idempotency_key,
        tool=request.tool,
        payload=request.payload.value,
        state=state,
        context=sealed_context(request, requested_by).model_dump(mode="json"),
        decided_by="ops-lead" if decided else None,
        decision_reason=reason,
        decided_at=NOW - timedelta(minutes=5) if decided else None,
        expires_at=expires_at,
        created_at=NOW - timedelta(minutes=10),
        definition_fingerprint=None if asked_for is None else asked_for[0],
        policy_digest=None if asked_for is None else asked_for[1],
    )


@dataclass(frozen=True)
class History:
    """What the store knows of ``request``'s decision; each method answers a new builder.

    ``History(req).after(EffectBoundary.EFFECT_FAILED, retryable=True).build()`` is a
    decision whose first attempt failed with retry advice. Any history at all binds the
    run's causal id to the request's decision, unless :meth:`bound_to` says otherwise.
    """

    request: AdmissionRequest
    latest: LatestAttempt | None = None
    in_flight: int | None = None
    consent: ConfirmationRecord | None = None
    bound_key: IdempotencyKey | None = None
    binding_given: bool = False
    owner: str | None = None
    read_at: datetime | None = NOW
    """The database's clock as it read the history: expiry is judged by it alone."""

    def after(
        self,
        boundary: EffectBoundary,
        *,
        attempt: int = 1,
        retryable: bool = False,
        position: int | None = None,
        resolved: EffectBoundary | None = None,
    ) -> History:
        """The decision's latest journaled attempt is ``attempt``, ended at ``boundary``
        (and, when uncertain, ``resolved`` by a resolution at position + 1)."""
        at = 10 + attempt if position is None else position
        latest = LatestAttempt(
            attempt=attempt,
            boundary=boundary,
            retryable=retryable,
            position=at,
            resolved=resolved,
            resolution_position=None if resolved is None else at + 1,
        )
        return dataclasses.replace(self, latest=latest)

    def running(self, attempt: int) -> History:
        """Attempt ``attempt`` is admitted and not yet journaled."""
        return dataclasses.replace(self, in_flight=attempt)

    def with_consent(
        self,
        state: ConfirmationState,
        *,
        requested_by: Identity = AGENT,
        expires_at: datetime = NOW + timedelta(hours=1),
        asked_for: tuple[str, str] | None = None,
        reason: str | None = None,
    ) -> History:
        record = confirmation(
            self.request,
            state,
            requested_by=requested_by,
            expires_at=expires_at,
            asked_for=asked_for,
            reason=reason,
        )
        return dataclasses.replace(self, consent=record)

    def of_run_bound_to(self, principal: Identity) -> History:
        """The run is bound to ``principal`` (whoever asks)."""
        return dataclasses.replace(self, owner=principal.principal_id)

    def read(self, at: datetime | None) -> History:
        """The store read the history when its clock said ``at`` (None: it did not say)."""
        return dataclasses.replace(self, read_at=at)

    def bound_to(self, key: IdempotencyKey | None) -> History:
        """The run's causal id names decision ``key`` (None: no decision yet)."""
        return dataclasses.replace(self, bound_key=key, binding_given=True)

    def build(self) -> DecisionHistory:
        bound = self.bound_key
        if not self.binding_given and (self.latest or self.in_flight or self.consent):
            bound = self.request.idempotency_key
        return DecisionHistory(
            bound_key=bound,
            latest=self.latest,
            in_flight=self.in_flight,
            confirmation=self.consent,
            read_at=self.read_at,
            owner=self.owner,
        )


def acting_for(person: str, actor: str | None, *, method: AuthMethod = "oidc") -> Identity:
    """``person`` of acme as an agent ``actor`` presents them (None: the person itself)."""
    agent = None if actor is None else Actor(principal_id=PrincipalId(actor), method=method)
    update = {"principal_id": PrincipalId(person), "method": "oidc", "key_id": None}
    return AGENT.model_copy(update={**update, "actor": agent})

"""The shapes that cross HTTP both ways: the server answers with them, the client reads them.

One definition each, so the two sides cannot drift. The server's answer models
(``arvis.api.schemas``) and the client's (``arvis.client.models``) subclass these: the
server keeps its OpenAPI names, the client its public names and its tolerance of fields
a newer server adds (``extra="allow"``). Plain pydantic, nothing of the kernel: the
client may import only ``arvis.domain``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, JsonValue

from arvis.domain.boundary import EffectBoundary
from arvis.domain.journal import Receipt

ConfirmationState: TypeAlias = Literal[
    "PENDING", "APPROVED", "RESERVED", "CONSUMED", "DENIED", "EXPIRED"
]


HEAD_SIGNED_HEADER = "ARVIS-Head-Signed"
"""On ``GET /v1/runs/{id}/bundle``: ``false`` when the deployment signs checkpoints but
could not sign the run's head now (its last entries will not verify with the key)."""


class Wire(BaseModel):
    model_config = ConfigDict(frozen=True)


Outcome: TypeAlias = Literal["executed", "deduplicated", "refused", "confirmation_required"]


class ConfirmationRef(Wire):
    """The confirmation a ``confirmation_required`` answer is waiting on."""

    id: str
    state: str


class SyscallAnswer(Wire):
    """What every syscall that reached governance answers (``POST /v1/syscalls``, replay).

    The server's ``SyscallResult`` and the client's answer models subclass it; each side
    narrows what it must (the server adds the resolution, the client one model per
    ``outcome`` and its tolerance of nested fields a newer server adds)."""

    outcome: Outcome
    boundary: EffectBoundary | None
    result: JsonValue = None
    """The tool's JSON result, when it completed without a problem."""
    problem: dict[str, Any] | None = None
    """A tool problem result or a classified failure: ``code``, ``detail`` and more."""
    reason: str | None = None
    """The denial code, when refused."""
    detail: str | None = None
    idempotency_key: str
    attempt: int | None = None
    run_id: str
    causal_id: str
    receipt: Receipt | None = None
    """The receipt the entry records (the journal's own type: one receipt type)."""
    journal_position: int | None = None
    confirmation: ConfirmationRef | None = None
    audit_incomplete: bool = False
    """The effect's result could not be journaled; the run is flagged (DESIGN §2)."""


class ToolInfo(Wire):
    """One definition of the current plan."""

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Literal["read_only", "mutating"]
    replay_safety: Literal["safe", "idempotent", "unsafe"]
    capabilities: list[str]
    fingerprint: str


class JournalEntry(Wire):
    """One link of a run's hash chain."""

    position: int
    kind: str
    """``execution``, ``refusal``, ``recovery`` or ``confirmation``."""
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: EffectBoundary | None
    body: dict[str, Any]
    prev_hash: str
    entry_hash: str
    recorded_at: datetime


class Verification(Wire):
    """``GET /v1/runs/{id}/verify``: the chain recomputed."""

    ok: bool
    entries: int
    """Entries that verified before the first break (all of them when ``ok``)."""
    broken_at: int | None
    """The first position where the chain breaks, or null."""
    reason: str | None = None
    checkpoints: int | None = None
    """Signed checkpoints checked and held; null when the deployment has no public key
    configured (then none are checked)."""
    rewritten_before: int | None = None
    """A signed checkpoint disagrees with the chain: the run was rewritten before this
    position, even if every hash links."""
    unsigned: int | None = None
    """Entries after the last signed checkpoint (the witness covers them); null when the
    deployment has no public key configured."""
    witness: str | None = None
    """The first disagreement with the deployment's file witness, or null (none found,
    or no witness that can be read back)."""
    flagged: str | None = None
    """The run's evidence was found broken before (by the checkpointer, a verify, a
    replay or a deduplicated answer), and what was found; null: never."""


class ConsentPolicyInfo(Wire):
    """Which policy asked for a consent, and why."""

    engine: str
    """``rules`` or ``cedar``."""
    version: str
    digest: str
    policy_ids: list[str] = []
    """The rules (or Cedar policies) that demanded the consent."""
    reason: str | None = None
    """The engine's words for why (e.g. the tool is on the list that needs consent)."""


class Confirmation(Wire):
    """A consent request, as an approver sees it (the frozen payload included)."""

    id: str
    state: ConfirmationState
    run_id: str
    causal_id: str
    idempotency_key: str
    tool: str
    payload: Any
    """The frozen payload the approver consents to."""
    decided_by: str | None
    reason: str | None
    expires_at: datetime
    created_at: datetime
    policy: ConsentPolicyInfo | None = None
    """Which policy asked for the consent, and why (null: asked before revision 0018)."""


class Resolution(Wire):
    """``POST /v1/runs/{id}/attempts/{key}/{attempt}/resolve``: the resolution entry."""

    run_id: str
    causal_id: str
    idempotency_key: str
    attempt: int
    boundary: EffectBoundary
    """The resolved boundary: EFFECT_COMPLETED, EFFECT_FAILED or EFFECT_NOT_STARTED."""
    resolves: int
    """The journal position of the uncertain entry (never changed)."""
    resolved_by: str
    evidence: str
    journal_position: int
    entry_hash: str
    recorded_at: datetime


RunStatus: TypeAlias = Literal[
    "audit_incomplete", "uncertain", "waiting_for_consent", "refused", "running"
]


class RunInfo(Wire):
    """One run of a tenant as ``GET /v1/runs`` lists it."""

    run_id: str
    status: RunStatus
    """What needs a person first, the first that holds: ``audit_incomplete`` (an
    effect's result could not be journaled), ``uncertain`` (an uncertain attempt not
    resolved), ``waiting_for_consent`` (a confirmation still PENDING), ``refused`` (its
    latest entry is a refusal), else ``running`` (none of these; a run whose calls all
    ended is ``running`` too: ARVIS is not told when an agent's run is over)."""
    principal: str | None
    """The principal the run is bound to (the person, when an agent acted for one)."""
    actors: list[str] = []
    """The agents that acted for the principal in the run's calls (issue 26), sorted;
    empty: the principal made every call itself."""
    tools: list[str]
    """The tools the run asked for."""
    started_at: datetime
    last_activity: datetime | None
    entries: int
    """Journal entries so far."""
    waiting: int
    """Confirmations waiting for consent."""
    uncertain: int
    """Uncertain attempts not resolved yet."""
    audit_incomplete: bool


class ApiKeyInfo(Wire):
    """One API key as ``GET /v1/keys`` lists it: never its secret or its hash."""

    key_id: str
    tenant_id: str
    principal: str
    roles: list[str]
    groups: list[str]
    state: Literal["active", "revoked"]
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    """To within a minute; null when not used since it was recorded (revision 0016)."""

"""The wire format of ARVIS's HTTP API (docs/http.md), as the client reads it.

These are the client's own models, not the server's: an agent runtime imports them
without importing the kernel. Every answer model is frozen and allows extra fields, so
a newer server that adds a field does not break an older client; a field the client
relies on that disappears, or a value outside a closed vocabulary (an outcome, a
boundary), fails validation and surfaces as
:class:`~arvis.client.errors.UnexpectedAnswer` instead of being guessed at.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

__all__ = [
    "Answer",
    "Boundary",
    "Confirmation",
    "ConfirmationPage",
    "ConfirmationRef",
    "ConfirmationRequired",
    "ConfirmationState",
    "Deduplicated",
    "Executed",
    "JournalEntry",
    "JournalPage",
    "Receipt",
    "Refused",
    "ReplayPage",
    "ToolInfo",
    "ToolPlan",
    "Verification",
]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class Boundary(StrEnum):
    """How far an effect got (DESIGN §1). Every recorded result carries exactly one."""

    PRE_EFFECT_REFUSAL = "PRE_EFFECT_REFUSAL"
    """Refused at admission; nothing was minted or run."""
    EFFECT_NOT_STARTED = "EFFECT_NOT_STARTED"
    """Dispatched, but the effect provably did not start."""
    EFFECT_STARTED = "EFFECT_STARTED"
    """The effect started; its end was not observed."""
    EFFECT_COMPLETED = "EFFECT_COMPLETED"
    """The tool returned a result (a problem result is still a completed outcome)."""
    EFFECT_FAILED = "EFFECT_FAILED"
    """The effect started and the tool reported a typed failure."""
    EFFECT_STATE_UNKNOWN = "EFFECT_STATE_UNKNOWN"
    """Nobody can say whether the effect happened."""

    @property
    def uncertain(self) -> bool:
        """True when the effect may or may not have happened: never retry it blindly."""
        return self in (Boundary.EFFECT_STARTED, Boundary.EFFECT_STATE_UNKNOWN)


class Receipt(_Wire):
    """The audit sink's receipt for the attempt's intent."""

    position: int
    intent_commitment: str
    store_fingerprint: str


class ConfirmationRef(_Wire):
    """The confirmation a ``confirmation_required`` answer is waiting on."""

    id: str
    state: str


class _AnswerBase(_Wire):
    boundary: Boundary | None = None
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
    journal_position: int | None = None
    confirmation: ConfirmationRef | None = None
    audit_incomplete: bool = False
    """The effect's result could not be journaled; the run is flagged (DESIGN §2)."""

    @property
    def uncertain(self) -> bool:
        """The effect may have happened or not; re-running it may repeat it."""
        return self.boundary is not None and self.boundary.uncertain


class Executed(_AnswerBase):
    """This attempt was admitted, dispatched and journaled. Read ``boundary`` for how far
    the effect got: ``EFFECT_COMPLETED`` (``result`` or a tool ``problem``),
    ``EFFECT_NOT_STARTED``, ``EFFECT_FAILED``, or the uncertain ``EFFECT_STARTED`` /
    ``EFFECT_STATE_UNKNOWN``."""

    outcome: Literal["executed"]
    boundary: Boundary


class Deduplicated(_AnswerBase):
    """An earlier attempt of the same decision completed: this is its recorded result.
    Nothing was minted and nothing ran."""

    outcome: Literal["deduplicated"]
    boundary: Boundary


class Refused(_AnswerBase):
    """Refused before anything was minted (``PRE_EFFECT_REFUSAL``); ``reason`` is the
    stable denial code (``policy_denied``, ``retry_prohibited_uncertain``, …)."""

    outcome: Literal["refused"]
    reason: str


class ConfirmationRequired(_AnswerBase):
    """An approver must consent first; nothing was minted. Once the confirmation is
    approved, re-post the identical syscall (same run id and causal id) to run it."""

    outcome: Literal["confirmation_required"]
    confirmation: ConfirmationRef


Answer: TypeAlias = Annotated[
    Executed | Deduplicated | Refused | ConfirmationRequired, Field(discriminator="outcome")
]
"""What ``tool.execute`` answers, tagged by ``outcome``."""

ANSWER: TypeAdapter[Executed | Deduplicated | Refused | ConfirmationRequired] = TypeAdapter(Answer)


class ToolInfo(_Wire):
    """One definition of the current plan."""

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Literal["read_only", "mutating"]
    replay_safety: Literal["safe", "idempotent", "unsafe"]
    capabilities: list[str]
    fingerprint: str


class ToolPlan(_Wire):
    """``GET /v1/tools``: the current plan, which a new run binds to."""

    plan_id: str
    tools: list[ToolInfo]


class JournalEntry(_Wire):
    """One link of a run's hash chain."""

    position: int
    kind: str
    """``execution``, ``refusal``, ``recovery`` or ``confirmation``."""
    causal_id: str
    idempotency_key: str
    attempt: int | None
    intent_id: str | None
    boundary: Boundary | None
    body: dict[str, Any]
    prev_hash: str
    entry_hash: str
    recorded_at: datetime


class JournalPage(_Wire):
    """One page of a run's journal; pass ``next_after`` as ``after`` for the next."""

    run_id: str
    entries: list[JournalEntry]
    next_after: int | None


class Verification(_Wire):
    """``GET /v1/runs/{id}/verify``: the chain recomputed."""

    ok: bool
    entries: int
    """Entries that verified before the first break (all of them when ``ok``)."""
    broken_at: int | None
    """The first position where the chain breaks, or null."""
    reason: str | None = None
    checkpoints: int | None = None
    """Signed checkpoints that held; null when the server has no public key configured."""
    rewritten_before: int | None = None
    """A signed checkpoint disagrees: the run was rewritten before this position."""
    unsigned: int | None = None
    """Entries after the last signed checkpoint; null without a public key."""
    witness: str | None = None
    """The first disagreement with the server's file witness, or null."""
    flagged: str | None = None
    """The run's evidence was found broken before, and what was found; null: never."""


class ReplayPage(_Wire):
    """One page of a run's recorded results, in the order first settled. Nothing ran."""

    run_id: str
    results: list[Answer]
    next_after: int | None = None


ConfirmationState: TypeAlias = Literal[
    "PENDING", "APPROVED", "RESERVED", "CONSUMED", "DENIED", "EXPIRED"
]


class Confirmation(_Wire):
    """A consent request, as an approver sees it (the frozen payload included)."""

    id: str
    state: ConfirmationState
    run_id: str
    causal_id: str
    idempotency_key: str
    tool: str
    payload: Any
    decided_by: str | None
    reason: str | None
    expires_at: datetime
    created_at: datetime


class ConfirmationPage(_Wire):
    """One page of confirmations, by id; pass ``next_after`` as ``after`` for the next."""

    confirmations: list[Confirmation]
    next_after: str | None

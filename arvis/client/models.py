"""The wire format of ARVIS's HTTP API (docs/http.md), as the client reads it.

These are the client's own models, not the server's: an agent runtime imports them
without importing the kernel. Every answer model is frozen and allows extra fields, so
a newer server that adds a field does not break an older client; a field the client
relies on that disappears, or a value outside a closed vocabulary (an outcome, a
boundary), fails validation and surfaces as
:class:`~arvis.client.errors.UnexpectedAnswer` instead of being guessed at.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from arvis.domain import journal, wire
from arvis.domain.boundary import EffectBoundary
from arvis.domain.wire import HEAD_SIGNED_HEADER, ConfirmationState

__all__ = [
    "HEAD_SIGNED_HEADER",
    "Answer",
    "Boundary",
    "Bundle",
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
    "Resolution",
    "ToolInfo",
    "ToolPlan",
    "Verification",
]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


Boundary = EffectBoundary
"""How far an effect got (DESIGN §1); ``uncertain`` says whether it may have happened."""


class Receipt(_Wire, journal.Receipt):
    """The audit sink's receipt for the attempt's intent."""

    # _Wire's, restated: pydantic takes the last base's config, here the journal's.
    model_config = ConfigDict(frozen=True, extra="allow")


class ConfirmationRef(_Wire, wire.ConfirmationRef):
    """The confirmation a ``confirmation_required`` answer is waiting on."""


class _AnswerBase(_Wire, wire.SyscallAnswer):
    # What the client reads beyond the shared shape: an answer without a boundary, and
    # nested models that keep a newer server's fields like every model here.
    boundary: Boundary | None = None
    receipt: Receipt | None = None
    confirmation: ConfirmationRef | None = None

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


class ToolInfo(_Wire, wire.ToolInfo):
    """One definition of the current plan."""


class ToolPlan(_Wire):
    """``GET /v1/tools``: the current plan, which a new run binds to."""

    plan_id: str
    tools: list[ToolInfo]


class JournalEntry(_Wire, wire.JournalEntry):
    """One link of a run's hash chain."""


class JournalPage(_Wire):
    """One page of a run's journal; pass ``next_after`` as ``after`` for the next."""

    run_id: str
    entries: list[JournalEntry]
    next_after: int | None


class Verification(_Wire, wire.Verification):
    """``GET /v1/runs/{id}/verify``: the chain recomputed."""


class ReplayPage(_Wire):
    """One page of a run's recorded results, in the order first settled. Nothing ran."""

    run_id: str
    results: list[Answer]
    next_after: int | None = None


class Confirmation(_Wire, wire.Confirmation):
    """A consent request, as an approver sees it (the frozen payload included)."""


class ConfirmationPage(_Wire):
    """One page of confirmations, by id; pass ``next_after`` as ``after`` for the next."""

    confirmations: list[Confirmation]
    next_after: str | None


class Resolution(_Wire, wire.Resolution):
    """``POST /v1/runs/{id}/attempts/{key}/{attempt}/resolve``: the resolution entry."""

    consent: dict[str, Any] | None = None
    """The consent's new round (``confirmation_id``, ``round``, ``state``, ``approvals``,
    ``quorum``), when the attempt ran under consent and is resolved as not started."""


class Bundle(_Wire):
    """``GET /v1/runs/{id}/bundle``: the run's audit bundle, for ``arvis verify --bundle``."""

    data: bytes
    """The bundle's bytes exactly as served (its digest covers them)."""
    head_signed: bool
    """False when the deployment signs checkpoints but could not sign the run's head
    now: the last entries will not verify with the public key."""

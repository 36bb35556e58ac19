"""What the dispatcher answers: a tool's result or a classified failure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arvis.domain.boundary import EffectBoundary
from arvis.tools.base import ToolResult
from arvis.tools.limits import FAILURE_CODE, MAX_MESSAGE_CHARS


class ToolFailure(BaseModel):
    """A dispatch that produced no result, classified for the journal.

    ``message`` is safe to show a caller: it is the tool's own typed message or
    a fixed text written by ARVIS, never an exception's text.

    ``effect_started`` and ``end_unobserved`` together name one of four states:

    ====================  ==================  ========================
    ``effect_started``    ``end_unobserved``  boundary
    ====================  ==================  ========================
    ``False``             ``False``           ``EFFECT_NOT_STARTED``
    ``True``              ``False``           ``EFFECT_FAILED``
    ``True``              ``True``            ``EFFECT_STARTED``
    ``None``              ``False``           ``EFFECT_STATE_UNKNOWN``
    ====================  ==================  ========================

    Only a start that is known and an end that is not can be "unobserved"; both
    uncertain states are never retryable. A read-only tool never answers either
    (the dispatcher enforces that; this model cannot know the tool).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(pattern=FAILURE_CODE.pattern)
    message: str = Field(max_length=MAX_MESSAGE_CHARS)
    effect_started: bool | None
    """``False``: provably not started; ``True``: known to have started; ``None``: unknown."""
    end_unobserved: bool = False
    """``True``: the effect is known to have started (the tool reported its start)
    but how it ended was not observed — the deadline expired, the tool crashed, or
    it said the outcome was unknown. Requires ``effect_started=True``."""
    retryable: bool

    @model_validator(mode="after")
    def _uncertain_is_never_retryable(self) -> ToolFailure:
        if self.end_unobserved and self.effect_started is not True:
            raise ValueError("only a started effect can have an unobserved end")
        if (self.effect_started is None or self.end_unobserved) and self.retryable:
            raise ValueError("an uncertain outcome is never retryable")
        return self


class DispatchOutcome(BaseModel):
    """Exactly one of ``result`` or ``failure``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: ToolResult | None = None
    failure: ToolFailure | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DispatchOutcome:
        if (self.result is None) == (self.failure is None):
            raise ValueError("a dispatch outcome holds exactly one of result or failure")
        return self

    @property
    def boundary(self) -> EffectBoundary:
        """The effect boundary this outcome implies.

        A value, or a problem after the effect started, is a completed outcome;
        accepted work (:meth:`ToolResult.accepted`) is ``EFFECT_STARTED``; a
        problem or failure that provably did not start is ``EFFECT_NOT_STARTED``;
        a failure after the start is ``EFFECT_FAILED``, or ``EFFECT_STARTED`` when
        its end was not observed; an unknown start is ``EFFECT_STATE_UNKNOWN``.
        """
        if self.result is not None:
            if self.result.pending:
                return EffectBoundary.EFFECT_STARTED
            problem = self.result.problem
            if problem is not None and not problem.effect_started:
                return EffectBoundary.EFFECT_NOT_STARTED
            return EffectBoundary.EFFECT_COMPLETED
        assert self.failure is not None
        if self.failure.effect_started is None:
            return EffectBoundary.EFFECT_STATE_UNKNOWN
        if self.failure.end_unobserved:
            return EffectBoundary.EFFECT_STARTED
        if self.failure.effect_started:
            return EffectBoundary.EFFECT_FAILED
        return EffectBoundary.EFFECT_NOT_STARTED

"""Effect boundaries (DESIGN §1): every journaled result carries exactly one.

The sets below are the one definition of "uncertain" and "resolved": the retry
table, the resolution service, the console and the store's triggers and checks
(``store/sql/arvis_boundaries.sql``, generated from them) all read these.
"""

from __future__ import annotations

from enum import StrEnum


class EffectBoundary(StrEnum):
    """How far an effect got. Values equal names so logs, rows and JSON agree."""

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
    """Nobody can say whether the effect happened (deadline, crash, lost journal)."""

    @property
    def retry_is_free(self) -> bool:
        """True when a retry cannot repeat an effect: nothing started."""
        return self in (EffectBoundary.PRE_EFFECT_REFUSAL, EffectBoundary.EFFECT_NOT_STARTED)

    @property
    def uncertain(self) -> bool:
        """True when nobody can say whether the effect happened: open for resolution."""
        return self in UNCERTAIN_BOUNDARIES


UNCERTAIN_BOUNDARIES = (EffectBoundary.EFFECT_STARTED, EffectBoundary.EFFECT_STATE_UNKNOWN)
"""Outcomes a person or a reconcile hook may resolve (issue 16)."""
RESOLVED_BOUNDARIES = (
    EffectBoundary.EFFECT_COMPLETED,
    EffectBoundary.EFFECT_FAILED,
    EffectBoundary.EFFECT_NOT_STARTED,
)
"""What a resolution may say an uncertain attempt did."""

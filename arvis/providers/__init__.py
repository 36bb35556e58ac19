"""Model provider adapters (DESIGN §8).

The vendor-neutral boundary lives here; each vendor's adapter is a package of
its own (``arvis.providers.openai``), imported only when configured.
"""

from arvis.providers.base import (
    FinalizedDecision,
    InputMessage,
    ModelProvider,
    ModelRequest,
    ModelStream,
    ModelTurn,
    Progress,
    ProviderLimits,
    StreamEvent,
    TextDelta,
    collect_turn,
)
from arvis.providers.errors import ProviderError, ProviderErrorCode
from arvis.providers.turn import run_turn

__all__ = [
    "FinalizedDecision",
    "InputMessage",
    "ModelProvider",
    "ModelRequest",
    "ModelStream",
    "ModelTurn",
    "Progress",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderLimits",
    "StreamEvent",
    "TextDelta",
    "collect_turn",
    "run_turn",
]

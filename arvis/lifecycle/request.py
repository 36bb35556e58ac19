"""The request every entry point translates into: a ``tool.execute`` syscall (DESIGN §10)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.decisions import ActionDecision
from arvis.domain.ids import ID_PATTERN


class Syscall(BaseModel):
    """A request from the cognitive pipeline. ``tool.execute`` is the only one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Literal["tool.execute"]
    run_id: str = Field(pattern=ID_PATTERN)
    causal_id: str = Field(pattern=ID_PATTERN)
    """Names one decision of the run, for ever; retries reuse it."""
    decision: ActionDecision

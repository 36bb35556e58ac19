"""What the cognitive pipeline asks for. A request, never a permission."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.definitions import TOOL_NAME


class ActionDecision(BaseModel):
    """A tool name and a JSON payload, as decided by the pipeline or a model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(pattern=TOOL_NAME.pattern)
    """The tool's name as the plan declares it."""
    payload: dict[str, Any]
    """The tool's JSON input. Frozen with RFC 8785 before anything else sees it."""

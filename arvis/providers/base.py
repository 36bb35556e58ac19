"""The provider boundary (DESIGN §8): what ARVIS asks a model, and what comes back.

A :class:`ModelProvider` turns one :class:`ModelRequest` into one
:class:`ModelStream`. The stream yields :class:`TextDelta` and :class:`Progress`
events while the model works and ends with exactly one :class:`ModelTurn`: the
final text and the finalized decisions, each carrying the provider's call id.
Nothing partial ever becomes a decision; a stream that breaks a rule raises a
:class:`~arvis.providers.errors.ProviderError` instead of yielding a turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arvis.domain.decisions import ActionDecision
from arvis.domain.definitions import ToolDefinition
from arvis.providers.errors import ProviderStreamTruncated


class ProviderLimits(BaseModel):
    """Bounds on one model call; crossing any of them fails the call closed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_events: int = Field(default=20_000, ge=1, le=1_000_000)
    """Most stream events accepted, the first included."""
    max_output_items: int = Field(default=64, ge=1, le=4096)
    """Most output items (messages, calls, reasoning) in one response."""
    max_argument_bytes: int = Field(default=64 * 1024, ge=2, le=16 * 1024 * 1024)
    """Largest arguments string of one call, in UTF-8 bytes."""
    max_text_bytes: int = Field(default=256 * 1024, ge=1, le=64 * 1024 * 1024)
    """Largest total output text (refusals included), in UTF-8 bytes."""
    max_output_tokens: int | None = Field(default=None, ge=16)
    """Sent to the provider as its own output token bound; unset leaves its default."""
    receive_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """Deadline of one receive when iterating a stream without an explicit timeout."""


class InputMessage(BaseModel):
    """One message of the conversation sent to the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["user", "assistant", "developer"]
    content: str = Field(min_length=1)


class ModelRequest(BaseModel):
    """One model call. ``model`` is authoritative: no provider substitutes another."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: str = Field(min_length=1, max_length=256)
    """The provider's model name, sent as given."""
    instructions: str | None = None
    """System-level instructions, or none."""
    input: str | tuple[InputMessage, ...]
    """The prompt, or the conversation so far."""
    tools: tuple[ToolDefinition, ...] = ()
    """The definitions of the run's plan; only these may be called."""
    limits: ProviderLimits = ProviderLimits()
    """Bounds on this call."""

    @field_validator("input")
    @classmethod
    def _input_not_empty(
        cls, value: str | tuple[InputMessage, ...]
    ) -> str | tuple[InputMessage, ...]:
        if isinstance(value, str) and not value.strip():
            raise ValueError("input must not be empty")
        if isinstance(value, tuple) and not value:
            raise ValueError("input must hold at least one message")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_tool_names(cls, value: tuple[ToolDefinition, ...]) -> tuple[ToolDefinition, ...]:
        names = [tool.name for tool in value]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique, repeated: {duplicates}")
        return value

    def tool(self, name: str) -> ToolDefinition | None:
        """The offered definition called ``name``, or ``None``."""
        for definition in self.tools:
            if definition.name == name:
                return definition
        return None


class TextDelta(BaseModel):
    """A piece of the model's visible text, for display only; never acted on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["text_delta"] = "text_delta"
    text: str


class Progress(BaseModel):
    """Something happened in the stream; for display and liveness only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["progress"] = "progress"
    stage: Literal["started", "call_started", "call_arguments_done", "completed"]
    tool: str | None = None
    """The tool being called, for the call stages."""
    call_id: str | None = None
    """The provider's call id, for the call stages."""


class FinalizedDecision(BaseModel):
    """A validated function call of a completed response."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str = Field(min_length=1, max_length=256)
    """The provider's call id: the causal id under which the decision is submitted."""
    decision: ActionDecision


class ModelTurn(BaseModel):
    """The last event of a stream: what the completed response said and decided."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["turn"] = "turn"
    response_id: str
    """The provider's id of the response, for correlation in logs."""
    text: str
    """The final visible text, all output text parts joined in order."""
    refusal: str | None = None
    """The model's refusal text, when it refused."""
    decisions: tuple[FinalizedDecision, ...] = ()
    """The function calls, in output order, each validated against its tool."""


StreamEvent = Annotated[TextDelta | Progress | ModelTurn, Field(discriminator="kind")]
"""What a :class:`ModelStream` yields; the last event is always a :class:`ModelTurn`."""


@runtime_checkable
class ModelStream(Protocol):
    """One model call in flight. Iterate it (one receiver at a time), then ``aclose()``."""

    def __aiter__(self) -> AsyncIterator[TextDelta | Progress | ModelTurn]: ...

    async def __anext__(self) -> TextDelta | Progress | ModelTurn: ...

    async def receive(self, *, timeout_s: float | None = None) -> TextDelta | Progress | ModelTurn:
        """The next event; ``StopAsyncIteration`` after the turn.

        Raises ``ProviderTimeout`` when ``timeout_s`` passes (the stream stays usable),
        ``ProviderConcurrentReceive`` while another receive waits, and
        ``ProviderStreamClosed`` once ``aclose()`` was called.
        """
        ...

    async def aclose(self) -> None:
        """Stop the call, release the connection and wait until that is done. Idempotent."""
        ...


@runtime_checkable
class ModelProvider(Protocol):
    """A model vendor behind the boundary."""

    async def stream(self, request: ModelRequest) -> ModelStream:
        """Start one call; start-up failures raise ``ProviderError`` here, not later."""
        ...


async def collect_turn(stream: ModelStream) -> ModelTurn:
    """Drain ``stream`` to its :class:`ModelTurn` (the stream is not closed here)."""
    async for event in stream:
        if isinstance(event, ModelTurn):
            return event
    # A conforming stream never ends without a turn; fail closed if one does.
    raise ProviderStreamTruncated("stream ended without a turn")

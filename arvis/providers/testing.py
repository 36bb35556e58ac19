"""A scripted model provider for tests, shipped with the library.

:class:`FakeProvider` plays back scripted responses through the same stream
mechanics and the same call validation as the real adapter, so a test that
scripts an unknown tool or malformed arguments sees the same ``ProviderError``
the OpenAI adapter would raise::

    provider = FakeProvider(FakeResponse(text="done", calls=(FakeCall("echo", {"x": 1}),)))
    outcomes = await run_turn(provider, request, submit)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from arvis.providers._stream import Event, PumpedStream
from arvis.providers.base import ModelRequest, ModelStream, ModelTurn, Progress, TextDelta
from arvis.providers.errors import ProviderError, ProviderLimitExceeded
from arvis.providers.validation import CallValidator


@dataclass(frozen=True)
class FakeCall:
    """One scripted function call."""

    tool: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    """A JSON object, or a raw arguments string (to script malformed arguments)."""
    call_id: str | None = None
    """The provider call id; unset: ``call_<n>`` by position."""


@dataclass(frozen=True)
class FakeResponse:
    """One scripted model response."""

    text: str = ""
    calls: tuple[FakeCall, ...] = ()
    error: ProviderError | None = None
    """Raised instead of the turn, after the text was streamed."""
    fail_at_start: bool = False
    """Raise ``error`` from ``stream()`` itself, as a start-up failure."""
    chunk_chars: int = 8
    """Size of the text deltas."""


class FakeProvider:
    """A :class:`~arvis.providers.base.ModelProvider` playing back ``responses`` in order."""

    def __init__(self, *responses: FakeResponse | str) -> None:
        self._responses = [FakeResponse(text=r) if isinstance(r, str) else r for r in responses]
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    async def stream(self, request: ModelRequest) -> ModelStream:
        """Play back the next scripted response for ``request``."""
        if not self._responses:
            raise RuntimeError("FakeProvider: no scripted response left")
        self.requests.append(request)
        response = self._responses.pop(0)
        if response.fail_at_start and response.error is not None:
            raise response.error
        return PumpedStream(
            _play(request, response), receive_timeout_s=request.limits.receive_timeout_s
        )


async def _play(request: ModelRequest, response: FakeResponse) -> AsyncIterator[Event]:
    yield Progress(stage="started")
    text = response.text
    if len(text.encode("utf-8")) > request.limits.max_text_bytes:
        raise ProviderLimitExceeded("output text too large", limit="max_text_bytes")
    step = max(1, response.chunk_chars)
    for start in range(0, len(text), step):
        yield TextDelta(text=text[start : start + step])
    if response.error is not None:
        raise response.error
    validator = CallValidator(request)
    decisions = []
    for position, call in enumerate(response.calls):
        call_id = call.call_id if call.call_id is not None else f"call_{position}"
        yield Progress(stage="call_started", tool=call.tool, call_id=call_id)
        arguments = (
            call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))
        )
        decisions.append(validator.finalize(name=call.tool, call_id=call_id, arguments=arguments))
    yield Progress(stage="completed")
    yield ModelTurn(response_id="fake", text=text, decisions=tuple(decisions))

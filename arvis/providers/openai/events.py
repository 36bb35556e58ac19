"""OpenAI Responses stream events, checked one by one and folded into a turn.

The SDK does not validate event payloads (it builds models without checking
them and maps unknown ``type`` strings onto arbitrary classes), so this module
works on the plain JSON of each event and dispatches on its ``type`` string.
Streamed pieces are only ever compared against the completed response; the
decisions come from ``response.completed`` alone, and only once the stream has
ended cleanly after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from arvis.providers.base import FinalizedDecision, ModelRequest, ModelTurn, Progress
from arvis.providers.errors import (
    ProviderError,
    ProviderHostedToolOutput,
    ProviderLimitExceeded,
    ProviderProtocolViolation,
    ProviderResponseFailed,
    ProviderResponseIncomplete,
    ProviderStreamError,
    ProviderStreamMismatch,
    ProviderStreamTruncated,
)
from arvis.providers.openai.output import Event, StreamedOutput, get, item_kind_of
from arvis.providers.validation import CallValidator, clip

# Items a provider executed itself stream under these prefixes; ARVIS offers no
# hosted tool, so any of them means the response escaped governance.
_HOSTED_EVENT_PREFIXES = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call",
    "response.image_generation_call.",
    "response.image_gen_call.",
    "response.mcp_",
    "response.computer_call",
    "response.local_shell_call",
    "response.shell_call",
    "response.apply_patch_call",
    "response.custom_tool_call_input.",
    "response.tool_search_call",
)
# Events that carry nothing ARVIS uses; reasoning never crosses the boundary.
_IGNORED_EVENTS = frozenset(
    {
        "response.in_progress",
        "response.queued",
        "response.output_text.annotation.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    }
)

_Handler = Callable[[Mapping[str, Any], str], list[Event]]


class ResponseTranslator:
    """Folds the events of one streamed response into ARVIS events and one turn."""

    def __init__(self, request: ModelRequest) -> None:
        self._limits = request.limits
        self._validator = CallValidator(request)
        self._output = StreamedOutput(request.limits, self._validator)
        self._events = 0
        self._turn: ModelTurn | None = None
        output = self._output
        self._handlers: dict[str, _Handler] = {
            "response.created": self._created,
            "error": self._error,
            "response.failed": self._failed,
            "response.incomplete": self._incomplete,
            "response.completed": self._completed,
            "response.output_item.added": output.added,
            "response.output_item.done": output.done,
            "response.function_call_arguments.delta": output.arguments_delta,
            "response.function_call_arguments.done": output.arguments_done,
            "response.output_text.delta": output.text_delta,
            "response.output_text.done": output.text_done,
            "response.refusal.delta": output.text_delta,
            "response.refusal.done": output.text_done,
            "response.content_part.added": output.content_part,
            "response.content_part.done": output.content_part,
        }

    def feed(self, event: Mapping[str, Any]) -> list[Event]:
        """Check one event; return what it means for the receiver (maybe nothing)."""
        self._events += 1
        if self._events > self._limits.max_events:
            raise ProviderLimitExceeded(
                f"more than {self._limits.max_events} events", limit="max_events"
            )
        kind = event.get("type")
        if not isinstance(kind, str):
            raise ProviderProtocolViolation("an event has no type string")
        if self._turn is not None:
            raise ProviderProtocolViolation(f"event {clip(kind)!r} after response.completed")
        if kind in _IGNORED_EVENTS:
            return []
        if kind.startswith(_HOSTED_EVENT_PREFIXES):
            raise ProviderHostedToolOutput(f"provider-executed tool event {clip(kind)!r}")
        handler = self._handlers.get(kind)
        if handler is None:
            raise ProviderProtocolViolation(f"unknown event type {clip(kind)!r}")
        return handler(event, kind)

    def finish(self) -> ModelTurn:
        """The turn, once the stream ended; no ``response.completed`` fails closed."""
        if self._turn is None:
            raise ProviderStreamTruncated("the stream ended without response.completed")
        return self._turn

    def _created(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        get(event, "response", dict, kind)
        return [Progress(stage="started")]

    def _error(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        raise _reported(ProviderStreamError, "the provider sent an error event", event, "")

    def _failed(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        error = get(event, "response", dict, kind).get("error")
        error = error if isinstance(error, dict) else {}
        raise _reported(ProviderResponseFailed, "the response failed", error, "no reason given")

    def _incomplete(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        response = get(event, "response", dict, kind)
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        raise ProviderResponseIncomplete(
            f"the response is incomplete ({clip(reason or 'no reason given')})",
            provider_code=_code(reason),
        )

    def _completed(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        response = get(event, "response", dict, kind)
        if response.get("status") != "completed":
            raise ProviderProtocolViolation(f"{kind}: status {clip(response.get('status'))!r}")
        response_id = get(response, "id", str, kind)
        output = get(response, "output", list, kind)
        if len(output) > self._limits.max_output_items:
            raise ProviderLimitExceeded(
                f"more than {self._limits.max_output_items} output items", limit="max_output_items"
            )
        texts: list[str] = []
        refusals: list[str] = []
        decisions: list[FinalizedDecision] = []
        for index, item in enumerate(output):
            if not isinstance(item, dict):
                raise ProviderProtocolViolation(f"{kind}: output item {index} is not an object")
            item_kind = item_kind_of(item, kind)
            if self._output.kinds.get(index) != item_kind:
                raise ProviderStreamMismatch(f"output item {index} was not streamed as {item_kind}")
            if item_kind == "function_call":
                arguments = self._output.final_call(index, item, kind)
                name, call_id = self._output.call_at(index)
                decisions.append(
                    self._validator.finalize(name=name, call_id=call_id, arguments=arguments)
                )
            elif item_kind == "message":
                for part_kind, text in self._output.final_message(index, item, kind):
                    (texts if part_kind == "output_text" else refusals).append(text)
        if len(output) != len(self._output.kinds):
            raise ProviderStreamMismatch("streamed output items are missing from the response")
        self._turn = ModelTurn(
            response_id=response_id,
            text="".join(texts),
            refusal="".join(refusals) if refusals else None,
            decisions=tuple(decisions),
        )
        return [Progress(stage="completed")]


def _reported(
    kind: type[ProviderError], what: str, error: Mapping[str, Any], no_message: str
) -> ProviderError:
    """The failure an error object of the provider reports: its message and code, clipped."""
    message = clip(error.get("message", no_message))
    return kind(f"{what}: {message}", provider_code=_code(error.get("code")))


def _code(value: Any) -> str | None:
    """The provider's own code of a failure, clipped; never its payload."""
    return None if value is None else clip(value)

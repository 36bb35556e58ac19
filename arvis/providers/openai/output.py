"""The output items of one streamed OpenAI response, as the deltas built them.

Each streamed piece is bounded and kept only to be compared with the completed
response; nothing here becomes a decision. Items are keyed by output index, and
every event's item id must agree with the item added at that index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from arvis.providers.base import ModelTurn, Progress, ProviderLimits, TextDelta
from arvis.providers.errors import (
    ProviderDuplicateCallId,
    ProviderHostedToolOutput,
    ProviderLimitExceeded,
    ProviderProtocolViolation,
    ProviderStreamMismatch,
)
from arvis.providers.validation import CallValidator, clip

Event = TextDelta | Progress | ModelTurn

# Only these item kinds may appear; anything else is provider-executed (hosted)
# or unknown, and either way escaped governance.
ITEM_KINDS = frozenset({"message", "function_call", "reasoning"})


def get(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """``data[key]`` when it is a ``kind``; otherwise the event is malformed."""
    value = data.get(key)
    # bool is an int to Python but never a valid index or count here.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProviderProtocolViolation(f"{where}: field {key!r} is missing or not {kind.__name__}")
    return value


def item_kind_of(item: Mapping[str, Any], where: str) -> str:
    """The item's type; a hosted or unknown type fails closed."""
    item_kind = get(item, "type", str, where)
    if item_kind not in ITEM_KINDS:
        raise ProviderHostedToolOutput(f"output item of type {clip(item_kind)!r}")
    return str(item_kind)


@dataclass
class _Call:
    item_id: str | None
    call_id: str
    name: str
    deltas: list[str] = field(default_factory=list)
    size: int = 0
    done: str | None = None


@dataclass
class _Message:
    item_id: str | None
    parts: dict[int, list[str]] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)


class StreamedOutput:
    """What the deltas of one response said, item by item.

    Each public ``(event, kind)`` method handles the stream event of that name and
    returns the ARVIS events it yields; ``final_*`` check a completed item.
    """

    def __init__(self, limits: ProviderLimits, validator: CallValidator) -> None:
        self._limits = limits
        self._validator = validator
        self.kinds: dict[int, str] = {}
        """The kind of each output item added so far, by output index."""
        self._calls: dict[int, _Call] = {}
        self._call_ids: set[str] = set()
        self._messages: dict[int, _Message] = {}
        self._text_bytes = 0

    def call_at(self, index: int) -> tuple[str, str]:
        """Tool name and call id of the function call streamed at ``index``."""
        call = self._calls[index]
        return call.name, call.call_id

    def added(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        index = get(event, "output_index", int, kind)
        item = get(event, "item", dict, kind)
        item_kind = item_kind_of(item, kind)
        if index in self.kinds:
            raise ProviderProtocolViolation(f"{kind}: output index {index} added twice")
        if len(self.kinds) >= self._limits.max_output_items:
            raise ProviderLimitExceeded(
                f"more than {self._limits.max_output_items} output items", limit="max_output_items"
            )
        self.kinds[index] = item_kind
        item_id = item.get("id") if isinstance(item.get("id"), str) else None
        if item_kind == "message":
            self._messages[index] = _Message(item_id)
        elif item_kind == "function_call":
            name = get(item, "name", str, kind)
            call_id = get(item, "call_id", str, kind)
            self._validator.known_tool(name, call_id=call_id)
            if call_id in self._call_ids:
                raise ProviderDuplicateCallId(
                    f"call id {call_id!r} appears twice in one response", tool=name, call_id=call_id
                )
            self._call_ids.add(call_id)
            self._calls[index] = _Call(item_id, call_id, name)
            return [Progress(stage="call_started", tool=name, call_id=call_id)]
        return []

    def done(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        index = get(event, "output_index", int, kind)
        item = get(event, "item", dict, kind)
        item_kind = item_kind_of(item, kind)
        if self.kinds.get(index) != item_kind:
            raise ProviderProtocolViolation(f"{kind}: output index {index} was not added as such")
        if item_kind == "function_call":
            self.final_call(index, item, kind)
        elif item_kind == "message":
            self.final_message(index, item, kind)
        return []

    # Function call arguments.

    def _call_for(self, event: Mapping[str, Any], kind: str) -> _Call:
        index = get(event, "output_index", int, kind)
        call = self._calls.get(index)
        if call is None:
            raise ProviderProtocolViolation(f"{kind}: output index {index} is not a function call")
        item_id = event.get("item_id")
        if call.item_id is not None and item_id != call.item_id:
            raise ProviderProtocolViolation(f"{kind}: item id does not match output index {index}")
        if call.done is not None:
            raise ProviderProtocolViolation(f"{kind}: call {call.call_id!r} already done")
        return call

    def arguments_delta(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        call = self._call_for(event, kind)
        delta = get(event, "delta", str, kind)
        call.size += len(delta.encode("utf-8"))
        if call.size > self._limits.max_argument_bytes:
            raise ProviderLimitExceeded(
                f"call {call.call_id!r}: arguments larger than "
                f"{self._limits.max_argument_bytes} bytes",
                tool=call.name,
                call_id=call.call_id,
                limit="max_argument_bytes",
            )
        call.deltas.append(delta)
        return []

    def arguments_done(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        call = self._call_for(event, kind)
        arguments = get(event, "arguments", str, kind)
        if arguments != "".join(call.deltas):
            raise ProviderStreamMismatch(
                f"call {call.call_id!r}: final arguments differ from the streamed deltas",
                tool=call.name,
                call_id=call.call_id,
            )
        call.done = arguments
        return [Progress(stage="call_arguments_done", tool=call.name, call_id=call.call_id)]

    def final_call(self, index: int, item: Mapping[str, Any], where: str) -> str:
        """The arguments of a final call item, which must be exactly what was streamed."""
        call = self._calls[index]
        name: str = get(item, "name", str, where)
        call_id: str = get(item, "call_id", str, where)
        arguments: str = get(item, "arguments", str, where)
        if (name, call_id) != (call.name, call.call_id):
            raise ProviderStreamMismatch(
                f"output item {index}: the final call differs from the streamed one",
                tool=name,
                call_id=call_id,
            )
        if arguments != "".join(call.deltas) or (call.done is not None and arguments != call.done):
            raise ProviderStreamMismatch(
                f"call {call_id!r}: final arguments differ from the streamed ones",
                tool=name,
                call_id=call_id,
            )
        return arguments

    # Text.

    def _part_for(self, event: Mapping[str, Any], kind: str, part_kind: str) -> list[str]:
        index = get(event, "output_index", int, kind)
        content_index = get(event, "content_index", int, kind)
        message = self._messages.get(index)
        if message is None:
            raise ProviderProtocolViolation(f"{kind}: output index {index} is not a message")
        if message.item_id is not None and event.get("item_id") != message.item_id:
            raise ProviderProtocolViolation(f"{kind}: item id does not match output index {index}")
        known = message.kinds.setdefault(content_index, part_kind)
        if known != part_kind:
            raise ProviderProtocolViolation(f"{kind}: content part {content_index} is a {known}")
        return message.parts.setdefault(content_index, [])

    def _count_text(self, text: str) -> None:
        self._text_bytes += len(text.encode("utf-8"))
        if self._text_bytes > self._limits.max_text_bytes:
            raise ProviderLimitExceeded(
                f"output text larger than {self._limits.max_text_bytes} bytes",
                limit="max_text_bytes",
            )

    def text_delta(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        part_kind = "output_text" if kind == "response.output_text.delta" else "refusal"
        part = self._part_for(event, kind, part_kind)
        delta = get(event, "delta", str, kind)
        self._count_text(delta)
        part.append(delta)
        return [TextDelta(text=delta)] if part_kind == "output_text" and delta else []

    def text_done(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        part_kind, key = (
            ("output_text", "text")
            if kind == "response.output_text.done"
            else ("refusal", "refusal")
        )
        part = self._part_for(event, kind, part_kind)
        if get(event, key, str, kind) != "".join(part):
            raise ProviderStreamMismatch(f"{kind}: the final text differs from the streamed deltas")
        return []

    def content_part(self, event: Mapping[str, Any], kind: str) -> list[Event]:
        index = get(event, "output_index", int, kind)
        if self.kinds.get(index) == "reasoning":
            return []  # reasoning content never crosses the boundary
        part = get(event, "part", dict, kind)
        part_kind = get(part, "type", str, kind)
        if part_kind not in ("output_text", "refusal"):
            raise ProviderProtocolViolation(f"{kind}: content part of type {clip(part_kind)!r}")
        pieces = self._part_for(event, kind, part_kind)
        if kind == "response.content_part.done":
            key = "text" if part_kind == "output_text" else "refusal"
            if get(part, key, str, kind) != "".join(pieces):
                raise ProviderStreamMismatch(f"{kind}: the final part differs from the deltas")
        return []

    def final_message(
        self, index: int, item: Mapping[str, Any], where: str
    ) -> list[tuple[str, str]]:
        """``(part kind, text)`` of a final message item, which must match the deltas."""
        message = self._messages[index]
        content = get(item, "content", list, where)
        parts: list[tuple[str, str]] = []
        for content_index, part in enumerate(content):
            if not isinstance(part, dict):
                raise ProviderProtocolViolation(f"{where}: a content part is not an object")
            part_kind = get(part, "type", str, where)
            if part_kind not in ("output_text", "refusal"):
                raise ProviderProtocolViolation(
                    f"{where}: content part of type {clip(part_kind)!r}"
                )
            text = get(part, "text" if part_kind == "output_text" else "refusal", str, where)
            streamed = message.parts.get(content_index)
            if message.kinds.get(content_index) != part_kind or "".join(streamed or []) != text:
                raise ProviderStreamMismatch(
                    f"output item {index}: the final text differs from the streamed deltas"
                )
            parts.append((part_kind, text))
        if len(content) != len(message.parts):
            raise ProviderStreamMismatch(f"output item {index}: streamed parts missing at the end")
        return parts

"""The boundary of an upstream call, through the one dispatcher (DESIGN §3).

The upstream session is a fake with the real session's contract: it raises
``UpstreamUnavailable`` when nothing was sent and anything else after sending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import pytest
from mcp import MCPError

from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import Effect, ReplaySafety
from arvis.tools import ToolDispatcher
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import McpTool
from arvis.tools.mcp.upstream import UpstreamChanged, UpstreamUnavailable
from arvis.tools.outcome import DispatchOutcome
from tests.support.fakes import definition, invocation, read_only

Answer = Callable[[], Any]


@dataclass
class FakeUpstream:
    answer: Answer
    url: str | None = None
    calls: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    callers: list[object] = field(default_factory=list)
    """The ``caller`` of each call (None without ``auth``)."""
    server: dict[str, Any] = field(default_factory=dict)
    """More fields of its ``[[tools.mcp]]`` entry."""

    @property
    def name(self) -> str:
        return "notes"

    @property
    def config(self) -> McpServerConfig:
        if self.url is not None:
            return McpServerConfig(name="notes", url=self.url, **self.server)
        return McpServerConfig(name="notes", command=["notes"], **self.server)

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any], caller: object = None
    ) -> Any:
        self.calls.append((tool, arguments, meta))
        self.callers.append(caller)
        return self.answer()


def raises(error: BaseException) -> Answer:
    def answer() -> Any:
        raise error

    return answer


def answers(result: types.CallToolResult) -> Answer:
    return lambda: result


async def dispatch(
    answer: Answer,
    *,
    effect: Effect = Effect.MUTATING,
    replay_safety: ReplaySafety = ReplaySafety.UNSAFE,
    server: dict[str, Any] | None = None,
) -> tuple[DispatchOutcome, FakeUpstream]:
    if effect is Effect.READ_ONLY:
        built = read_only("notes.add_note")
    else:
        built = definition("notes.add_note", replay_safety=replay_safety)
    upstream = FakeUpstream(answer, server=server or {})
    tool = McpTool(built, upstream, "add_note")  # type: ignore[arg-type]
    dispatcher = ToolDispatcher([tool])
    outcome = await dispatcher.dispatch(invocation("notes.add_note", {"text": "hi"}))
    return outcome, upstream


async def test_the_arguments_are_the_frozen_payload_and_meta_carries_key_and_call_id() -> None:
    result = types.CallToolResult(content=[], structured_content={"count": 1})
    outcome, upstream = await dispatch(answers(result))
    assert outcome.boundary is EffectBoundary.EFFECT_COMPLETED
    assert outcome.result is not None
    assert outcome.result.value == {"count": 1}
    [(tool, arguments, meta)] = upstream.calls
    sent = invocation("notes.add_note", {"text": "hi"})
    assert (tool, arguments) == ("add_note", {"text": "hi"})
    assert meta == {
        "arvis.dev/idempotency_key": sent.idempotency_key,
        "arvis.dev/call_id": "call-1",
    }


async def test_without_structured_content_the_content_blocks_are_the_value() -> None:
    result = types.CallToolResult(content=[types.TextContent(text="added")])
    outcome, _ = await dispatch(answers(result))
    assert outcome.result is not None
    assert outcome.result.value == [{"type": "text", "text": "added"}]


async def test_nothing_sent_is_not_started() -> None:
    outcome, _ = await dispatch(raises(UpstreamUnavailable("notes", "it exited")))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "upstream_unavailable"


async def test_a_tool_the_server_now_describes_differently_is_not_run() -> None:
    outcome, _ = await dispatch(raises(UpstreamChanged("notes", "add_note")))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "upstream_changed"


@pytest.mark.parametrize(
    "error",
    [
        MCPError(code=types.REQUEST_TIMEOUT, message="Request 'tools/call' timed out"),
        MCPError(code=types.CONNECTION_CLOSED, message="Connection closed"),
        MCPError(code=types.INTERNAL_ERROR, message="boom"),
        TimeoutError(),
        ConnectionResetError(),
    ],
)
async def test_anything_after_sending_is_unknown_and_never_retryable(error: Exception) -> None:
    outcome, _ = await dispatch(raises(error), replay_safety=ReplaySafety.IDEMPOTENT)
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert outcome.failure is not None
    assert outcome.failure.retryable is False


async def test_a_read_only_tool_that_got_no_answer_did_not_start_anything() -> None:
    timeout = MCPError(code=types.REQUEST_TIMEOUT, message="timed out")
    outcome, _ = await dispatch(raises(timeout), effect=Effect.READ_ONLY)
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


@pytest.mark.parametrize(
    "code",
    [
        types.PARSE_ERROR,  # also the SDK's word for a body that is not JSON
        types.INVALID_REQUEST,  # and for a 202, a redirect, a page
        types.METHOD_NOT_FOUND,  # and for a 404
        types.INVALID_PARAMS,
    ],
)
async def test_a_json_rpc_error_proves_the_call_arrived_so_it_is_unknown(code: int) -> None:
    refused = MCPError(code=code, message="Unknown tool: add_note")
    outcome, _ = await dispatch(raises(refused))
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert outcome.failure is not None
    assert outcome.failure.code == "upstream_unknown"


async def test_a_json_rpc_code_the_operator_declared_did_not_start() -> None:
    declared = {"not_started_codes": [types.INVALID_PARAMS]}
    refused = MCPError(code=types.INVALID_PARAMS, message="Unknown tool: add_note")
    outcome, _ = await dispatch(raises(refused), server=declared)
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.result is not None
    assert outcome.result.problem is not None
    assert outcome.result.problem.code == "upstream_rejected"
    other = MCPError(code=types.INTERNAL_ERROR, message="boom")
    unknown, _ = await dispatch(raises(other), server=declared)
    assert unknown.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_an_overrides_codes_replace_the_servers_for_its_tool() -> None:
    server = {
        "not_started_codes": [types.INVALID_PARAMS],
        "overrides": {"add_note": {"not_started_codes": []}},
    }
    refused = MCPError(code=types.INVALID_PARAMS, message="invalid")
    outcome, _ = await dispatch(raises(refused), server=server)
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


@pytest.mark.parametrize(
    ("replay_safety", "retry"), [(ReplaySafety.UNSAFE, False), (ReplaySafety.IDEMPOTENT, True)]
)
async def test_is_error_is_effect_failed_retried_only_when_not_unsafe(
    replay_safety: ReplaySafety, retry: bool
) -> None:
    result = types.CallToolResult(
        content=[types.TextContent(text="the notebook is locked")], is_error=True
    )
    outcome, _ = await dispatch(answers(result), replay_safety=replay_safety)
    assert outcome.boundary is EffectBoundary.EFFECT_FAILED
    assert outcome.failure is not None
    assert outcome.failure.retryable is retry
    assert "the notebook is locked" in outcome.failure.message


async def test_a_server_asking_for_input_it_cannot_get_is_unknown() -> None:
    asked = types.InputRequiredResult(request_state="x")
    outcome, _ = await dispatch(lambda: asked)
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_result_that_cannot_be_journaled_is_a_failure_after_the_start() -> None:
    deep: Any = "bottom"
    for _ in range(100):
        deep = [deep]
    result = types.CallToolResult(content=[], structured_content={"deep": deep})
    outcome, _ = await dispatch(answers(result))
    assert outcome.boundary is EffectBoundary.EFFECT_FAILED
    assert outcome.failure is not None
    assert outcome.failure.code == "invalid_upstream_result"


def test_a_url_server_is_the_tools_fixed_destination_for_the_egress_gate() -> None:
    upstream = FakeUpstream(lambda: None, url="https://notes.example/mcp")
    tool = McpTool(definition("notes.add_note"), upstream, "add_note")  # type: ignore[arg-type]
    assert ToolDispatcher([tool]).destination("notes.add_note") == "https://notes.example/mcp"
    stdio = McpTool(definition("notes.x"), FakeUpstream(lambda: None), "x")  # type: ignore[arg-type]
    assert ToolDispatcher([stdio]).destination("notes.x") is None

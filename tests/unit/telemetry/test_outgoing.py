"""What an outgoing tool call carries of the trace: an upstream MCP call's ``_meta``
gets the current span's ``traceparent`` from the tracer ARVIS hands the tool, and an
HTTP tool's configuration cannot set the trace headers itself."""

from __future__ import annotations

import mcp_types as types
import pytest
from pydantic import ValidationError

from arvis.domain.definitions import Effect, ReplaySafety
from arvis.tools import ToolDispatcher
from arvis.tools.http import HttpToolConfig
from arvis.tools.mcp.tools import McpTool
from tests.support.fakes import definition, invocation
from tests.support.tracing import CALLER_TRACE_ID, TRACEPARENT, TRACESTATE, recorded, span_id
from tests.unit.mcp.test_upstream_calls import FakeUpstream, answers

DONE = types.CallToolResult(content=[], structured_content={"count": 1})


async def test_an_upstream_call_carries_the_current_span_in_its_meta() -> None:
    spans = recorded()
    upstream = FakeUpstream(answers(DONE))
    tool = McpTool(definition("notes.add_note"), upstream, "add_note", spans.tracing.inject)  # type: ignore[arg-type]
    tracer = spans.tracing.provider.get_tracer("test")
    with spans.tracing.continued(TRACEPARENT, TRACESTATE), tracer.start_as_current_span("d"):
        await ToolDispatcher([tool]).dispatch(invocation("notes.add_note", {"text": "hi"}))

    [(_, _, meta)] = upstream.calls
    assert meta["traceparent"] == f"00-{CALLER_TRACE_ID}-{span_id(spans.one('d'))}-01"
    assert meta["tracestate"] == TRACESTATE
    assert meta["arvis.dev/call_id"] == "call-1"


@pytest.mark.parametrize("traced", [False, True])
async def test_without_a_tracer_or_outside_a_span_meta_has_no_trace_keys(traced: bool) -> None:
    upstream = FakeUpstream(answers(DONE))
    inject = recorded().tracing.inject if traced else None
    tool = McpTool(definition("notes.add_note"), upstream, "add_note", inject)  # type: ignore[arg-type]
    await ToolDispatcher([tool]).dispatch(invocation("notes.add_note", {"text": "hi"}))
    [(_, _, meta)] = upstream.calls
    assert set(meta) == {"arvis.dev/idempotency_key", "arvis.dev/call_id"}


@pytest.mark.parametrize("header", ["traceparent", "TraceState"])
def test_an_http_tool_may_not_configure_the_trace_headers(header: str) -> None:
    with pytest.raises(ValidationError, match="set by ARVIS"):
        HttpToolConfig(
            name="crm.update",
            description="Update a CRM record.",
            url="http://127.0.0.1/tool",
            effect=Effect.MUTATING,
            replay_safety=ReplaySafety.IDEMPOTENT,
            headers={header: "00-x"},
        )

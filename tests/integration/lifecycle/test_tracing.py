"""Traces of syscalls through SyscallHandler on a real store (docs/telemetry.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.errors import ShuttingDown
from arvis.tools.base import ToolInvocation, ToolResult
from tests.support.lifecycle import Harness, make_harness
from tests.support.tracing import (
    CALLER_SPAN_ID,
    CALLER_TRACE_ID,
    PHASES,
    TRACEPARENT,
    Recorded,
    every_value,
    parent_id,
    recorded,
    trace_id,
)


@pytest.fixture
def spans() -> Recorded:
    return recorded()


@pytest.fixture
async def traced(database_url: str, spans: Recorded) -> AsyncIterator[Harness]:
    built = await make_harness(database_url, tracer=spans.tracing)
    try:
        yield built
    finally:
        await built.close()


async def test_an_executed_call_is_one_execute_tool_span_with_its_three_phases(
    traced: Harness, spans: Recorded
) -> None:
    result = await traced.execute("write", {"text": "hi"}, causal_id="c-write")

    root = spans.one("execute_tool write")
    assert root.kind is SpanKind.INTERNAL
    assert root.parent is None
    assert spans.children(root) == list(PHASES)
    assert {trace_id(span) for span in spans.spans} == {trace_id(root)}
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write",
        "gen_ai.tool.call.id": "c-write",
        "arvis.run_id": traced.run_id,
        "arvis.tenant_id": "acme",
        "arvis.outcome": "executed",
        "arvis.boundary": "EFFECT_COMPLETED",
        "arvis.idempotency_key": result.idempotency_key,
        "arvis.attempt": 1,
        "arvis.journal_position": result.journal_position,
    }
    assert root.status.status_code is StatusCode.UNSET


async def test_the_callers_trace_is_the_parent_when_one_is_current(
    traced: Harness, spans: Recorded
) -> None:
    with spans.tracing.continued(TRACEPARENT):
        await traced.execute("read", {"q": 1})

    root = spans.one("execute_tool read")
    assert trace_id(root) == CALLER_TRACE_ID
    assert parent_id(root) == CALLER_SPAN_ID


async def test_a_refusal_has_its_span_with_the_denial_as_error_type(
    traced: Harness, spans: Recorded
) -> None:
    result = await traced.execute("no.such.tool", {})

    root = spans.one("execute_tool no.such.tool")
    attributes = root.attributes or {}
    assert attributes["arvis.outcome"] == "refused"
    assert attributes["arvis.boundary"] == "PRE_EFFECT_REFUSAL"
    assert attributes["error.type"] == "unknown_tool"
    assert attributes["arvis.journal_position"] == result.journal_position
    assert root.status.status_code is StatusCode.ERROR
    assert spans.children(root) == ["arvis.admission"]


async def test_a_deduplicated_call_has_its_span_and_runs_nothing(
    traced: Harness, spans: Recorded
) -> None:
    first = await traced.execute("write", {"text": "once"}, causal_id="c-dedupe")
    spans.clear()
    again = await traced.execute("write", {"text": "once"}, causal_id="c-dedupe")

    root = spans.one("execute_tool write")
    attributes = root.attributes or {}
    assert again.outcome == "deduplicated"
    assert attributes["arvis.outcome"] == "deduplicated"
    assert attributes["arvis.idempotency_key"] == first.idempotency_key
    assert "error.type" not in attributes
    assert spans.children(root) == ["arvis.admission"]


async def test_a_consent_request_has_its_span_naming_the_confirmation(
    traced: Harness, spans: Recorded
) -> None:
    result = await traced.execute("append", {"line": "x"})

    assert result.outcome == "confirmation_required"
    assert result.confirmation is not None
    attributes = spans.one("execute_tool append").attributes or {}
    assert attributes["arvis.outcome"] == "confirmation_required"
    assert attributes["arvis.confirmation_id"] == result.confirmation.id
    assert "error.type" not in attributes


async def test_a_failed_tool_has_its_problem_code_as_error_type(
    traced: Harness, spans: Recorded
) -> None:
    traced.tools["write"].then_fail(effect_started=True, retryable=False)
    result = await traced.execute("write", {"text": "boom"})

    assert result.boundary is EffectBoundary.EFFECT_FAILED
    root = spans.one("execute_tool write")
    assert (root.attributes or {})["error.type"] == "scripted_failure"
    assert (root.attributes or {})["arvis.boundary"] == "EFFECT_FAILED"
    assert root.status.status_code is StatusCode.ERROR
    assert spans.children(root) == list(PHASES)


async def test_a_syscall_that_raises_has_its_span_with_the_error_code(
    traced: Harness, spans: Recorded
) -> None:
    traced.lifecycle.handler.stop_admitting()
    with pytest.raises(ShuttingDown):
        await traced.execute("read", {})

    root = spans.one("execute_tool read")
    assert (root.attributes or {})["error.type"] == "shutting_down"
    assert root.status.status_code is StatusCode.ERROR


async def test_payloads_and_results_are_not_recorded_by_default(
    traced: Harness, spans: Recorded
) -> None:
    async def answer(invocation: ToolInvocation) -> ToolResult:
        return ToolResult.ok({"answer": "result-marker-91"})

    traced.tools["write"].then(answer)
    await traced.execute("write", {"text": "payload-marker-37"})

    leaked = [
        (span, key)
        for span, key, value in every_value(spans.spans)
        if "marker" in str(value)
        or (key.startswith("gen_ai.tool.call.") and key != "gen_ai.tool.call.id")
    ]
    assert leaked == []


async def test_record_payloads_records_the_arguments_and_never_the_result(
    database_url: str,
) -> None:
    spans = recorded(record_payloads=True)
    harness = await make_harness(database_url, tracer=spans.tracing)
    try:

        async def answer(invocation: ToolInvocation) -> ToolResult:
            return ToolResult.ok({"answer": "result-marker-91"})

        harness.tools["write"].then(answer)
        await harness.execute("write", {"text": "payload-marker-37"})
    finally:
        await harness.close()

    attributes = spans.one("execute_tool write").attributes or {}
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {
        "text": "payload-marker-37"
    }
    assert not [v for _, _, v in every_value(spans.spans) if "result-marker" in str(v)]

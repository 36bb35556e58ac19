"""Every fail-closed rule of DESIGN §8: a typed ProviderError, and no turn, ever."""

from __future__ import annotations

import httpx
import pytest

from arvis.providers import errors as e
from tests.unit.providers.sse import (
    ARGS_EMAIL,
    ARGS_LOOKUP,
    HAPPY_TEXT,
    Server,
    call_events,
    call_item,
    completed,
    created,
    encode,
    fails_with,
    happy_events,
    make_request,
    message_events,
    message_item,
    one_call,
    provider_for,
    sse_response,
)


async def test_a_call_to_a_tool_the_request_did_not_offer_fails_closed() -> None:
    error = await fails_with(one_call(name="shell.exec"), e.ProviderUnknownTool)
    assert (error.tool, error.call_id, error.retryable) == ("shell.exec", "call_a", False)


async def test_an_unknown_tool_only_in_the_final_output_fails_closed() -> None:
    events = one_call()
    events[-1] = completed([call_item(0, "shell.exec", "call_a", ARGS_LOOKUP)])
    await fails_with(events, e.ProviderStreamMismatch)


HOSTED_KINDS = [
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "computer_call",
    "mcp_call",
    "mcp_list_tools",
    "image_generation_call",
    "local_shell_call",
    "custom_tool_call",
    "a_future_item_type",
]


@pytest.mark.parametrize("kind", HOSTED_KINDS)
async def test_a_hosted_tool_item_in_the_stream_fails_closed(kind: str) -> None:
    item = {"id": "ws_0", "type": kind, "status": "in_progress"}
    events = [created(), {"type": "response.output_item.added", "output_index": 0, "item": item}]
    await fails_with(events, e.ProviderHostedToolOutput)


@pytest.mark.parametrize(
    "event_type",
    [
        "response.web_search_call.searching",
        "response.file_search_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.image_generation_call.partial_image",
        "response.mcp_call.in_progress",
    ],
)
async def test_a_hosted_tool_event_fails_closed(event_type: str) -> None:
    events = [created(), {"type": event_type, "output_index": 0, "item_id": "x"}]
    await fails_with(events, e.ProviderHostedToolOutput)


async def test_a_hosted_tool_item_only_in_the_completed_output_fails_closed() -> None:
    events = one_call()
    output = events[-1]["response"]["output"]
    output.append({"id": "ws_1", "type": "web_search_call", "status": "completed"})
    await fails_with(events, e.ProviderHostedToolOutput)


async def test_arguments_that_are_not_json_fail_closed() -> None:
    error = await fails_with(one_call(arguments='{"city": "Os'), e.ProviderArgumentsInvalid)
    assert error.call_id == "call_a"


@pytest.mark.parametrize(
    "arguments", ['["Oslo"]', '"Oslo"', "null", '{"city": NaN}', '{"city": "a", "city": "b"}']
)
async def test_arguments_that_are_not_a_plain_json_object_fail_closed(arguments: str) -> None:
    await fails_with(one_call(arguments=arguments), e.ProviderArgumentsInvalid)


@pytest.mark.parametrize("arguments", ["{}", '{"city": 7}', '{"city": "Oslo", "extra": 1}'])
async def test_arguments_violating_the_input_schema_fail_closed(arguments: str) -> None:
    error = await fails_with(one_call(arguments=arguments), e.ProviderArgumentsSchemaViolation)
    assert error.tool == "weather.lookup"


async def test_duplicate_call_ids_fail_closed() -> None:
    events = [
        created(),
        *call_events(0, "weather.lookup", "call_a", ARGS_LOOKUP),
        *call_events(1, "email.send", "call_a", ARGS_EMAIL),
        completed(
            [
                call_item(0, "weather.lookup", "call_a", ARGS_LOOKUP),
                call_item(1, "email.send", "call_a", ARGS_EMAIL),
            ]
        ),
    ]
    error = await fails_with(events, e.ProviderDuplicateCallId)
    assert error.call_id == "call_a"


async def test_argument_deltas_disagreeing_with_the_done_arguments_fail_closed() -> None:
    events = one_call()
    done = next(ev for ev in events if ev["type"] == "response.function_call_arguments.done")
    done["arguments"] = '{"city": "Bergen"}'
    await fails_with(events, e.ProviderStreamMismatch)


async def test_final_arguments_disagreeing_with_the_deltas_fail_closed() -> None:
    events = [
        created(),
        *call_events(0, "weather.lookup", "call_a", ARGS_LOOKUP)[:-1],
        completed([call_item(0, "weather.lookup", "call_a", '{"city": "Bergen"}')]),
    ]
    await fails_with(events, e.ProviderStreamMismatch)


async def test_a_streamed_call_missing_from_the_final_output_fails_closed() -> None:
    events = [created(), *call_events(0, "weather.lookup", "call_a", ARGS_LOOKUP), completed([])]
    await fails_with(events, e.ProviderStreamMismatch)


async def test_a_final_call_that_was_never_streamed_fails_closed() -> None:
    events = [created(), completed([call_item(0, "weather.lookup", "call_a", ARGS_LOOKUP)])]
    await fails_with(events, e.ProviderStreamMismatch)


async def test_text_deltas_disagreeing_with_the_done_text_fail_closed() -> None:
    events = [created(), *message_events(0, HAPPY_TEXT)]
    done = next(ev for ev in events if ev["type"] == "response.output_text.done")
    done["text"] = "Something else entirely."
    await fails_with(events, e.ProviderStreamMismatch)


async def test_final_text_disagreeing_with_the_deltas_fail_closed() -> None:
    streamed = [ev for ev in message_events(0, HAPPY_TEXT) if ev["type"].endswith(".delta")]
    events = [
        created(),
        message_events(0, HAPPY_TEXT)[0],
        *streamed,
        completed([message_item(0, "I will delete everything.")]),
    ]
    await fails_with(events, e.ProviderStreamMismatch)


async def test_response_failed_fails_closed() -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "id": "resp_1",
            "status": "failed",
            "output": [],
            "error": {"code": "server_error", "message": "The model crashed."},
        },
    }
    error = await fails_with([created(), failed], e.ProviderResponseFailed)
    assert error.provider_code == "server_error"


async def test_response_incomplete_fails_closed_even_after_complete_calls() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {
            "id": "resp_1",
            "status": "incomplete",
            "output": [call_item(0, "weather.lookup", "call_a", ARGS_LOOKUP)],
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    }
    events = [created(), *call_events(0, "weather.lookup", "call_a", ARGS_LOOKUP), incomplete]
    error = await fails_with(events, e.ProviderResponseIncomplete)
    assert error.provider_code == "max_output_tokens"


async def test_an_error_event_mid_stream_fails_closed() -> None:
    error_event = {"type": "error", "code": "server_error", "message": "Overloaded", "param": None}
    events = [created(), *message_events(0, HAPPY_TEXT)[:3], error_event]
    error = await fails_with(events, e.ProviderStreamError)
    assert error.provider_code == "server_error"


async def test_a_stream_ending_without_response_completed_fails_closed() -> None:
    events = happy_events()[:-1]
    await fails_with(events, e.ProviderStreamTruncated)


async def test_an_event_after_response_completed_fails_closed() -> None:
    events = [*happy_events(), {"type": "response.output_text.delta", "delta": "late"}]
    await fails_with(events, e.ProviderProtocolViolation)


async def test_an_unknown_event_type_fails_closed() -> None:
    events = [created(), {"type": "response.teleport.started", "output_index": 0}]
    await fails_with(events, e.ProviderProtocolViolation)


async def test_a_malformed_event_fails_closed() -> None:
    events = [created(), *message_events(0, HAPPY_TEXT)]
    delta = next(ev for ev in events if ev["type"] == "response.output_text.delta")
    delta["delta"] = 42
    await fails_with(events, e.ProviderProtocolViolation)


async def test_an_event_that_is_not_json_fails_closed() -> None:
    body = encode([created()]) + b"event: response.output_text.delta\ndata: {not json\n\n"
    await fails_with(body, e.ProviderProtocolViolation)


async def test_too_many_events_fail_closed() -> None:
    error = await fails_with(happy_events(), e.ProviderLimitExceeded, make_request(max_events=5))
    assert error.limit == "max_events"


async def test_too_many_output_items_fail_closed() -> None:
    request = make_request(max_output_items=3)
    error = await fails_with(happy_events(), e.ProviderLimitExceeded, request)
    assert error.limit == "max_output_items"


async def test_too_many_argument_bytes_fail_closed() -> None:
    request = make_request(max_argument_bytes=8)
    error = await fails_with(one_call(), e.ProviderLimitExceeded, request)
    assert (error.limit, error.call_id) == ("max_argument_bytes", "call_a")


async def test_too_many_text_bytes_fail_closed() -> None:
    request = make_request(max_text_bytes=10)
    error = await fails_with(happy_events(), e.ProviderLimitExceeded, request)
    assert error.limit == "max_text_bytes"


async def test_a_connection_lost_mid_stream_fails_closed_and_is_not_retried() -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[override]
            yield encode([created()])
            raise httpx.ReadError("connection reset")

    server = Server(lambda: sse_response(Broken()))
    stream = await provider_for(server, max_retries=3).stream(make_request())
    with pytest.raises(e.ProviderUnavailable):
        async for _ in stream:
            pass
    await stream.aclose()
    assert len(server.requests) == 1

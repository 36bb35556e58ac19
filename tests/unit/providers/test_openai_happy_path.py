"""The OpenAI adapter on a well-formed stream, and what it sends."""

from __future__ import annotations

import json

from arvis.domain.decisions import ActionDecision
from arvis.providers.base import ModelTurn, Progress, TextDelta
from arvis.providers.turn import run_turn
from tests.unit.providers.sse import (
    HAPPY_TEXT,
    Server,
    email_tool,
    fixture,
    lookup_tool,
    make_request,
    provider_for,
)


async def test_text_and_two_calls_become_a_turn_with_two_finalized_decisions() -> None:
    server = Server(fixture("text_and_two_calls.sse"))
    stream = await provider_for(server).stream(make_request())
    events = [event async for event in stream]
    await stream.aclose()

    assert isinstance(events[0], Progress)
    assert events[0].stage == "started"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == HAPPY_TEXT
    turn = events[-1]
    assert isinstance(turn, ModelTurn)
    assert [e for e in events if isinstance(e, ModelTurn)] == [turn]
    assert turn.response_id == "resp_1"
    assert turn.text == HAPPY_TEXT
    assert turn.refusal is None
    assert [(d.call_id, d.decision) for d in turn.decisions] == [
        ("call_a", ActionDecision(tool="weather.lookup", payload={"city": "Oslo"})),
        (
            "call_b",
            ActionDecision(tool="email.send", payload={"to": "ana@example.com", "body": "Sunny"}),
        ),
    ]
    started = [e for e in events if isinstance(e, Progress) and e.stage == "call_started"]
    assert [(e.tool, e.call_id) for e in started] == [
        ("weather.lookup", "call_a"),
        ("email.send", "call_b"),
    ]
    assert len(server.requests) == 1


async def test_reasoning_never_crosses_the_boundary() -> None:
    server = Server(fixture("text_and_two_calls.sse"))
    stream = await provider_for(server).stream(make_request())
    events = [event async for event in stream]
    assert "secret chain of thought" not in repr(events)
    assert all(type(e).__module__ == "arvis.providers.base" for e in events)


async def test_request_sends_only_name_description_and_schema_with_strict_where_it_qualifies() -> (
    None
):
    server = Server(fixture("text_and_two_calls.sse"))
    stream = await provider_for(server).stream(make_request())
    await stream.aclose()

    body = json.loads(server.bodies[0])
    assert server.requests[0].url.path == "/v1/responses"
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["instructions"] == "Be brief."
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather.lookup",
            "description": "Current weather for a city.",
            "parameters": lookup_tool().input_schema,
            "strict": True,
        },
        {
            "type": "function",
            "name": "email.send",
            "description": "Send an email.",
            "parameters": email_tool().input_schema,
            "strict": False,
        },
    ]
    for word in ("read_only", "mutating", "unsafe", "network.access", lookup_tool().fingerprint):
        assert word not in server.bodies[0].decode()


async def test_policy_only_definition_changes_leave_the_request_body_byte_identical() -> None:
    server = Server(fixture("text_and_two_calls.sse"))
    provider = provider_for(server)
    as_unsafe = email_tool()
    as_idempotent = email_tool(replay_safety="idempotent", capabilities=["email.outbound"])
    assert as_unsafe.fingerprint != as_idempotent.fingerprint

    for email in (as_unsafe, as_idempotent):
        stream = await provider.stream(make_request([lookup_tool(), email]))
        await stream.aclose()

    assert server.bodies[0] == server.bodies[1]


async def test_run_turn_submits_each_finalized_decision_with_its_call_id_in_order() -> None:
    server = Server(fixture("text_and_two_calls.sse"))
    submitted: list[tuple[str, ActionDecision]] = []

    async def submit(causal_id: str, decision: ActionDecision) -> str:
        submitted.append((causal_id, decision))
        return f"outcome-{len(submitted)}"

    seen: list[object] = []
    outcomes = await run_turn(provider_for(server), make_request(), submit, on_event=seen.append)

    assert outcomes == ["outcome-1", "outcome-2"]
    assert [(c, d.tool) for c, d in submitted] == [
        ("call_a", "weather.lookup"),
        ("call_b", "email.send"),
    ]
    assert isinstance(seen[-1], ModelTurn)

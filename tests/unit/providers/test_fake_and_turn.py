"""The shipped FakeProvider fails closed like the real adapter; run_turn's contract."""

from __future__ import annotations

import pytest

from arvis.domain.decisions import ActionDecision
from arvis.providers import errors as e
from arvis.providers.base import ModelTurn, TextDelta, collect_turn
from arvis.providers.testing import FakeCall, FakeProvider, FakeResponse
from arvis.providers.turn import run_turn
from tests.unit.providers.sse import Server, encode, happy_events, make_request, provider_for


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, ActionDecision]] = []
        self.fail_on = fail_on

    async def __call__(self, causal_id: str, decision: ActionDecision) -> str:
        if causal_id == self.fail_on:
            raise RuntimeError("syscall failed")
        self.calls.append((causal_id, decision))
        return f"executed {decision.tool}"


async def test_the_fake_plays_back_text_and_calls_as_a_turn() -> None:
    provider = FakeProvider(
        FakeResponse(
            text="On it.",
            calls=(
                FakeCall("weather.lookup", {"city": "Oslo"}, call_id="c1"),
                FakeCall("email.send", {"to": "ana@example.com"}),
            ),
        )
    )
    request = make_request()
    stream = await provider.stream(request)
    events = [event async for event in stream]
    await stream.aclose()
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "On it."
    turn = events[-1]
    assert isinstance(turn, ModelTurn)
    assert [d.call_id for d in turn.decisions] == ["c1", "call_1"]
    assert provider.requests == [request]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (FakeCall("shell.exec", {}), e.ProviderUnknownTool),
        (FakeCall("weather.lookup", "[1]"), e.ProviderArgumentsInvalid),
        (FakeCall("weather.lookup", {"town": "Oslo"}), e.ProviderArgumentsSchemaViolation),
    ],
)
async def test_the_fake_fails_closed_like_the_real_adapter(
    call: FakeCall, error: type[e.ProviderError]
) -> None:
    stream = await FakeProvider(FakeResponse(calls=(call,))).stream(make_request())
    with pytest.raises(error):
        await collect_turn(stream)
    await stream.aclose()


async def test_the_fake_scripts_start_up_failures() -> None:
    provider = FakeProvider(FakeResponse(error=e.ProviderRateLimited("slow"), fail_at_start=True))
    with pytest.raises(e.ProviderRateLimited):
        await provider.stream(make_request())


async def test_run_turn_submits_decisions_in_order_with_call_ids_as_causal_ids() -> None:
    provider = FakeProvider(
        FakeResponse(
            calls=(
                FakeCall("email.send", {"to": "a@example.com"}, call_id="first"),
                FakeCall("weather.lookup", {"city": "Oslo"}, call_id="second"),
            )
        )
    )
    submit = Recorder()
    outcomes = await run_turn(provider, make_request(), submit)
    assert outcomes == ["executed email.send", "executed weather.lookup"]
    assert [(c, d.tool) for c, d in submit.calls] == [
        ("first", "email.send"),
        ("second", "weather.lookup"),
    ]


async def test_run_turn_submits_nothing_when_the_stream_fails_after_valid_calls() -> None:
    # Two valid, complete calls, then the response is cut off: nothing may run.
    submit = Recorder()
    server = Server(encode(happy_events()[:-1]))
    with pytest.raises(e.ProviderStreamTruncated):
        await run_turn(provider_for(server), make_request(), submit)
    assert submit.calls == []


async def test_run_turn_submits_nothing_when_one_call_of_many_is_invalid() -> None:
    provider = FakeProvider(
        FakeResponse(
            calls=(
                FakeCall("weather.lookup", {"city": "Oslo"}),
                FakeCall("weather.lookup", {"city": 1}),
            )
        )
    )
    submit = Recorder()
    with pytest.raises(e.ProviderArgumentsSchemaViolation):
        await run_turn(provider, make_request(), submit)
    assert submit.calls == []


async def test_run_turn_stops_at_the_first_failing_submission() -> None:
    provider = FakeProvider(
        FakeResponse(
            calls=(
                FakeCall("weather.lookup", {"city": "Oslo"}, call_id="a"),
                FakeCall("weather.lookup", {"city": "Rome"}, call_id="b"),
                FakeCall("weather.lookup", {"city": "Lima"}, call_id="c"),
            )
        )
    )
    submit = Recorder(fail_on="b")
    with pytest.raises(RuntimeError, match="syscall failed"):
        await run_turn(provider, make_request(), submit)
    assert [c for c, _ in submit.calls] == ["a"]

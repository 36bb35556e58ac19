"""Start-up failures surface from ``stream()`` itself, typed; the SDK retries only there."""

from __future__ import annotations

import httpx
import pytest

from arvis.providers import errors as e
from arvis.providers.base import ModelTurn
from tests.unit.providers.sse import Server, created, encode, fixture, make_request, provider_for


def status(code: int, **headers: str) -> httpx.Response:
    body = {"error": {"message": "secret-ish detail", "type": "x", "code": f"code_{code}"}}
    return httpx.Response(code, json=body, headers=headers)


@pytest.mark.parametrize(
    ("code", "error", "retryable"),
    [
        (429, e.ProviderRateLimited, True),
        (500, e.ProviderUnavailable, True),
        (503, e.ProviderUnavailable, True),
        (401, e.ProviderAuthFailed, False),
        (403, e.ProviderAuthFailed, False),
        (400, e.ProviderRequestRejected, False),
    ],
)
async def test_an_http_status_at_start_up_is_a_typed_provider_error(
    code: int, error: type[e.ProviderError], retryable: bool
) -> None:
    server = Server(status(code))
    with pytest.raises(error) as caught:
        await provider_for(server).stream(make_request())
    assert caught.type is error
    assert caught.value.status_code == code
    assert caught.value.retryable is retryable
    assert "secret-ish detail" not in str(caught.value)
    assert len(server.requests) == 1


async def test_a_connection_error_at_start_up_is_provider_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(e.ProviderUnavailable) as caught:
        await provider_for(refuse).stream(make_request())
    assert caught.value.retryable


async def test_an_immediate_error_event_fails_at_start_up() -> None:
    body = encode(
        [{"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None}]
    )
    with pytest.raises(e.ProviderStreamError) as caught:
        await provider_for(Server(body)).stream(make_request())
    assert caught.value.provider_code == "rate_limit_exceeded"


async def test_an_empty_stream_fails_at_start_up() -> None:
    with pytest.raises(e.ProviderStreamTruncated):
        await provider_for(Server(b"")).stream(make_request())


async def test_the_sdk_retries_the_request_that_opens_the_stream() -> None:
    server = Server(status(500, **{"retry-after-ms": "1"}), fixture("text_and_two_calls.sse"))
    stream = await provider_for(server, max_retries=1).stream(make_request())
    events = [event async for event in stream]
    await stream.aclose()
    assert isinstance(events[-1], ModelTurn)
    assert len(server.requests) == 2


async def test_nothing_is_retried_once_the_stream_was_returned() -> None:
    server = Server(encode([created()]))
    stream = await provider_for(server, max_retries=3).stream(make_request())
    with pytest.raises(e.ProviderStreamTruncated):
        async for _ in stream:
            pass
    await stream.aclose()
    assert len(server.requests) == 1

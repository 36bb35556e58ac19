"""A refused connection fails fast unless the policy waits for the server, the client
says in its log what it does, and ``from_env`` reads ARVIS_URL and ARVIS_API_KEY."""

from __future__ import annotations

import logging

import httpx
import pytest

from arvis.client import (
    ArvisClient,
    AsyncArvisClient,
    ConnectFailed,
    RetryExhausted,
    RetryPolicy,
)

TOKEN = "arvis_k0123456789abcdef_secret"


class Refusing(httpx.BaseTransport):
    """Every request is refused at connect, as by a port nothing listens on."""

    def __init__(self) -> None:
        self.attempts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts += 1
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def test_a_refused_connection_fails_at_once_by_default_and_the_log_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = Refusing()
    caplog.set_level(logging.WARNING, logger="arvis.client")
    client = ArvisClient("http://127.0.0.1:9", TOKEN, transport=transport)
    with client, pytest.raises(ConnectFailed) as raised:
        client.tools()

    assert raised.value.refused
    assert transport.attempts == 1
    [line] = [r.getMessage() for r in caplog.records]
    assert "http://127.0.0.1:9 refused the connection; not retrying" in line
    assert "retry_refused=True" in line


def test_retry_refused_waits_for_the_server_and_logs_its_first_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = Refusing()
    policy = RetryPolicy(
        total_s=0.3, initial_backoff_s=0.01, max_backoff_s=0.02, retry_refused=True
    )
    caplog.set_level(logging.DEBUG, logger="arvis.client")
    client = ArvisClient("http://127.0.0.1:9", TOKEN, transport=transport, retry=policy)
    with client, pytest.raises(RetryExhausted) as raised:
        client.tools()

    assert transport.attempts > 1
    assert isinstance(raised.value.last, ConnectFailed)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "GET http://127.0.0.1:9/v1/tools failed (connect_failed); re-posting" in (
        warnings[0].getMessage()
    )


def test_a_connect_timeout_is_still_retried_by_default() -> None:
    class TimingOut(Refusing):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            self.attempts += 1
            raise httpx.ConnectTimeout("timed out", request=request)

    transport = TimingOut()
    policy = RetryPolicy(total_s=0.2, initial_backoff_s=0.01, max_backoff_s=0.02)
    client = ArvisClient("http://127.0.0.1:9", TOKEN, transport=transport, retry=policy)
    with client, pytest.raises(RetryExhausted):
        client.tools()
    assert transport.attempts > 1


async def test_from_env_reads_the_url_and_the_key_for_both_clients() -> None:
    environ = {"ARVIS_URL": "http://arvis.example:8000/", "ARVIS_API_KEY": TOKEN}
    with ArvisClient.from_env(environ) as blocking:
        assert blocking.base_url == "http://arvis.example:8000"
        assert blocking._http.headers["Authorization"] == f"Bearer {TOKEN}"
    async with AsyncArvisClient.from_env(environ, retry=RetryPolicy(total_s=1)) as aio:
        assert aio.base_url == "http://arvis.example:8000"
        assert aio.retry.total_s == 1


def test_from_env_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARVIS_URL", raising=False)
    monkeypatch.setenv("ARVIS_API_KEY", TOKEN)
    with pytest.raises(ValueError, match="set ARVIS_URL to reach ARVIS"):
        ArvisClient.from_env()
    with pytest.raises(ValueError, match="set ARVIS_URL and ARVIS_API_KEY"):
        ArvisClient.from_env({})

"""The [provider] section, the factory, and an import that does nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from arvis.domain.errors import ConfigurationError
from arvis.providers.base import ModelTurn
from arvis.providers.config import build_provider, load_provider_config
from arvis.providers.openai import OpenAIProvider
from tests.unit.providers.sse import Server, email_tool, fixture, lookup_tool


def file_config(**provider: object) -> dict[str, object]:
    """The [provider] section of an arvis.toml."""
    return {"kind": "openai", "model": "gpt-test", **provider}


def test_no_provider_section_builds_no_provider() -> None:
    assert build_provider({}, {"OPENAI_API_KEY": "sk-x"}) is None


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ({"kind": "anthropic", "model": "m"}, "kind"),
        ({"kind": "openai"}, "provider.model"),
        ({"kind": "openai", "model": "m", "colour": "red"}, "provider.colour"),
        ({"kind": "openai", "model": "m", "base_url": "ftp://x"}, "provider.base_url"),
        (
            {"kind": "openai", "model": "m", "limits": {"max_events": 0}},
            "provider.limits.max_events",
        ),
    ],
)
def test_a_bad_provider_section_stops_start_up_naming_the_field(
    section: dict[str, object], where: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_provider_config(section)
    assert where in str(caught.value)


def test_a_missing_api_key_stops_start_up_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="ARVIS_OPENAI_KEY"):
        build_provider(file_config(api_key_env="ARVIS_OPENAI_KEY"), {"OPENAI_API_KEY": "sk-x"})
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        build_provider(file_config(), {})


async def call_through(config: dict[str, object], environ: dict[str, str]) -> httpx.Request:
    server = Server(fixture("text_and_two_calls.sse"))
    http_client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    provider = build_provider(config, environ, http_client=http_client)  # type: ignore[arg-type]
    assert isinstance(provider, OpenAIProvider)
    request = load_provider_config(config).request("hello", [lookup_tool(), email_tool()])  # type: ignore[union-attr]
    stream = await provider.stream(request)
    events = [event async for event in stream]
    await stream.aclose()
    assert isinstance(events[-1], ModelTurn)
    return server.requests[0]


async def test_the_key_comes_from_the_variable_the_config_names() -> None:
    environ = {"ARVIS_OPENAI_KEY": "sk-named", "OPENAI_API_KEY": "sk-default"}
    sent = await call_through(file_config(api_key_env="ARVIS_OPENAI_KEY"), environ)
    assert sent.headers["authorization"] == "Bearer sk-named"


async def test_the_sdk_variables_apply_unless_the_config_overrides_them() -> None:
    environ = {"OPENAI_API_KEY": "sk-default", "OPENAI_BASE_URL": "http://env-proxy/v1"}
    sent = await call_through(file_config(), environ)
    assert sent.headers["authorization"] == "Bearer sk-default"
    assert str(sent.url) == "http://env-proxy/v1/responses"

    sent = await call_through(file_config(base_url="https://gateway.example/v9"), environ)
    assert str(sent.url) == "https://gateway.example/v9/responses"


async def test_the_configured_model_instructions_and_limits_make_the_request() -> None:
    config = file_config(instructions="Be terse.", limits={"max_output_tokens": 256})
    sent = await call_through(config, {"OPENAI_API_KEY": "sk-x"})
    body = json.loads(sent.content)
    assert (body["model"], body["instructions"], body["max_output_tokens"]) == (
        "gpt-test",
        "Be terse.",
        256,
    )


def test_importing_the_providers_builds_nothing_and_needs_no_environment() -> None:
    code = (
        "import sys, arvis.providers, arvis.providers.config; "
        "assert 'openai' not in sys.modules, 'the SDK was imported'; "
        "import arvis.providers.openai, arvis.providers.testing; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env={"PATH": ""}, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"

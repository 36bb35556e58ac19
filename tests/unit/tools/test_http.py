"""Remote HTTP tools: the invocation POSTed with its idempotency key (DESIGN §3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from arvis.config import FileConfig, Settings
from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import DefinitionError
from arvis.tools import ToolDispatcher, ToolHost, build_tool_set
from arvis.tools.http import HttpTool, HttpToolConfig, http_tool
from tests.support.fakes import invocation

Handler = Callable[[httpx.Request], httpx.Response]


def tool(handler: Handler, **overrides: object) -> HttpTool:
    fields: dict[str, object] = {
        "name": "crm.update",
        "description": "Update a CRM record.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "idempotent",
        "capabilities": ["network.access"],
    }
    fields.update(overrides)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return http_tool(HttpToolConfig.model_validate(fields), client, source="test")


async def test_the_invocation_is_posted_with_its_idempotency_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"value": {"updated": True}})

    inv = invocation("crm.update", {"id": 7})
    outcome = await ToolDispatcher([tool(handler)]).dispatch(inv)
    assert outcome.result is not None
    assert outcome.result.value == {"updated": True}
    assert seen[0].headers["Idempotency-Key"] == inv.idempotency_key
    body = json.loads(seen[0].content)
    assert body["payload"] == {"id": 7}
    assert body["call_id"] == "call-1"


async def test_a_connect_failure_did_not_start_the_effect() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    outcome = await ToolDispatcher([tool(handler)]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.retryable


async def test_a_timeout_after_the_request_was_sent_is_state_unknown() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    outcome = await ToolDispatcher([tool(handler)]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert outcome.failure is not None
    assert not outcome.failure.retryable


async def test_a_client_error_response_is_a_problem_not_started() -> None:
    outcome = await ToolDispatcher([tool(lambda r: httpx.Response(422))]).dispatch(
        invocation("crm.update")
    )
    assert outcome.result is not None
    assert outcome.result.problem is not None
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED


def test_a_contradictory_http_tool_names_the_tool_rule_and_entry() -> None:
    with pytest.raises(DefinitionError, match=r"crm\.update.*read_only.*test"):
        tool(lambda r: httpx.Response(200), effect="read_only", replay_safety="safe")


async def test_http_tools_are_declared_in_the_tools_section(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    entry = {
        "name": "crm.update",
        "description": "Update.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "unsafe",
    }
    async with httpx.AsyncClient() as client:
        host = ToolHost.from_settings(settings, client)
        tools = build_tool_set(settings, FileConfig(tools={"http": [entry]}), host)
    assert "crm.update" in [t.name for t in tools]

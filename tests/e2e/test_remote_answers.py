"""DESIGN §10 "Not-started needs proof", over HTTP, for both remote tool kinds.

Each stub here performs its effect and only then answers — the hostile case: a
202, a page, a redirect, a 404, a body that is not JSON, a JSON-RPC error, a 4xx.
Any answer proves the request arrived, so none of them may be journaled
``EFFECT_NOT_STARTED``: a consented call keeps its confirmation consumed, and
re-posting the same decision must not run the effect a second time. Only a code
the operator declared in ``arvis.toml`` (``not_started_statuses``,
``not_started_codes``) makes an answer "not started".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.http import Api, serve_api
from tests.support.mcp_client import notes_command
from tests.support.server import running
from tests.support.upstream.acting import (
    ANSWERS,
    ENDPOINT_ANSWERS,
    ActingEndpoint,
    ActingUpstream,
)

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[ActingUpstream, str]]:
    stub = ActingUpstream()
    with running(stub) as url:
        yield stub, f"{url}/mcp"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[tuple[ActingEndpoint, str]]:
    stub = ActingEndpoint()
    with running(stub) as url:
        yield stub, url


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes-state")


def _http_tool(name: str, url: str, extra: str = "") -> str:
    return f"""
[[tools.http]]
name = "{name}"
description = "Acts, then answers."
url = "{url}"
effect = "mutating"
replay_safety = "unsafe"
timeout_s = 5
{extra}
"""


@pytest.fixture(scope="module")
async def api(
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    upstream: tuple[ActingUpstream, str],
    endpoint: tuple[ActingEndpoint, str],
    state: Path,
) -> AsyncIterator[Api]:
    _, mcp_url = upstream
    _, base = endpoint
    http_tools = "".join(
        _http_tool(f"remote.{path[1:]}", f"{base}{path}") for path in ENDPOINT_ANSWERS
    )
    declared = _http_tool(
        "remote.declared", f"{base}/unprocessable", "not_started_statuses = [422]"
    )
    config = f"""
[[tools.mcp]]
name = "act"
url = "{mcp_url}"
timeout_s = 5

[[tools.mcp]]
name = "notes"
command = {notes_command(state)}
timeout_s = 5
[tools.mcp.overrides.reject]
not_started_codes = [-32099]

{http_tools}
{declared}

[policy.default]
egress_hosts = ["127.0.0.1"]
"""
    async with serve_api(
        database_url, tmp_path_factory.mktemp("arvis-remote"), config=config
    ) as served:
        yield served


async def _consented(api: Api, tool: str, payload: dict[str, Any], causal: str) -> dict[str, Any]:
    """Ask, approve, run: the executed answer of one consented decision."""
    asked = await api.syscall(tool, payload, run_id="run-remote", causal_id=causal)
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    cid = asked.json()["confirmation"]["id"]
    approved = await api.client.post(
        f"/v1/confirmations/{cid}/approve", headers=api.auth("acme:approver")
    )
    assert approved.status_code == 200, approved.text
    ran = await api.syscall(tool, payload, run_id="run-remote", causal_id=causal)
    assert ran.json()["outcome"] == "executed", ran.text
    answer: dict[str, Any] = ran.json()
    answer["confirmation_id"] = cid
    return answer


async def _confirmation_state(api: Api, cid: str) -> str:
    listed = await api.client.get("/v1/confirmations", headers=api.auth("acme:approver"))
    [found] = [c for c in listed.json()["confirmations"] if c["id"] == cid]
    return str(found["state"])


async def _repost(api: Api, tool: str, payload: dict[str, Any], causal: str) -> dict[str, Any]:
    again = await api.syscall(tool, payload, run_id="run-remote", causal_id=causal)
    answer: dict[str, Any] = again.json()
    return answer


def _effects(state: Path) -> list[dict[str, Any]]:
    path = state / "effects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("answer", [a for a in ANSWERS if a != "ok"] + ["server_error"])
async def test_an_mcp_upstream_that_acted_then_answered_badly_is_never_not_started(
    api: Api, upstream: tuple[ActingUpstream, str], answer: str
) -> None:
    stub, _ = upstream
    tool, causal = f"act.{answer}", f"mcp-{answer}"
    ran = await _consented(api, tool, {"text": "x"}, causal)
    again = await _repost(api, tool, {"text": "x"}, causal)
    assert ran["boundary"] == "EFFECT_STATE_UNKNOWN", ran
    assert again["outcome"] == "refused"
    assert again["reason"] == "retry_prohibited_uncertain"
    assert stub.effect_count(answer) == 1
    assert await _confirmation_state(api, ran["confirmation_id"]) == "CONSUMED"


@pytest.mark.parametrize("code", [-32700, -32600, -32601, -32602, -32603, 7])
async def test_a_stdio_upstream_that_acted_then_answered_a_json_rpc_error_is_never_not_started(
    api: Api, state: Path, code: int
) -> None:
    causal = f"stdio-{code}"
    ran = await _consented(api, "notes.reject", {"code": code}, causal)
    again = await _repost(api, "notes.reject", {"code": code}, causal)
    assert ran["boundary"] == "EFFECT_STATE_UNKNOWN", ran
    assert again["reason"] == "retry_prohibited_uncertain"
    assert [e["code"] for e in _effects(state)].count(code) == 1
    assert await _confirmation_state(api, ran["confirmation_id"]) == "CONSUMED"


async def test_a_json_rpc_code_the_operator_declared_is_not_started_and_runs_again(
    api: Api, state: Path
) -> None:
    ran = await _consented(api, "notes.reject", {"code": -32099}, "stdio-declared")
    assert ran["boundary"] == "EFFECT_NOT_STARTED", ran
    assert ran["problem"]["code"] == "upstream_rejected"
    assert await _confirmation_state(api, ran["confirmation_id"]) == "APPROVED"
    again = await _repost(api, "notes.reject", {"code": -32099}, "stdio-declared")
    assert (again["outcome"], again["attempt"]) == ("executed", 2)
    assert [e["code"] for e in _effects(state)].count(-32099) == 2


@pytest.mark.parametrize("path", list(ENDPOINT_ANSWERS))
async def test_an_http_tool_that_acted_then_answered_badly_is_never_not_started(
    api: Api, endpoint: tuple[ActingEndpoint, str], path: str
) -> None:
    stub, _ = endpoint
    tool, causal = f"remote.{path[1:]}", f"http-{path[1:]}"
    ran = await _consented(api, tool, {"text": "x"}, causal)
    again = await _repost(api, tool, {"text": "x"}, causal)
    assert ran["boundary"] in ("EFFECT_STATE_UNKNOWN", "EFFECT_FAILED", "EFFECT_STARTED"), ran
    assert again["outcome"] == "refused"
    assert again["reason"] in ("retry_prohibited_uncertain", "retry_not_advised")
    assert stub.effect_count(path) == 1
    assert await _confirmation_state(api, ran["confirmation_id"]) == "CONSUMED"


async def test_an_http_status_the_operator_declared_is_not_started_and_runs_again(
    api: Api, endpoint: tuple[ActingEndpoint, str]
) -> None:
    stub, _ = endpoint
    before = stub.effect_count("/unprocessable")
    ran = await _consented(api, "remote.declared", {"text": "x"}, "http-declared")
    assert ran["boundary"] == "EFFECT_NOT_STARTED", ran
    assert ran["problem"]["code"] == "remote_rejected"
    assert await _confirmation_state(api, ran["confirmation_id"]) == "APPROVED"
    again = await _repost(api, "remote.declared", {"text": "x"}, "http-declared")
    assert (again["outcome"], again["attempt"]) == ("executed", 2)
    assert stub.effect_count("/unprocessable") == before + 2

"""The HTTP and the upstream MCP tool kinds share one header validator and one
classification of how a remote call ends (arvis/tools/remote.py): the same bad
header gets the same message, the same far-side event the same boundary, advice
and message, under each kind's own code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp import MCPError

from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import ConfigurationError
from arvis.tools import ToolDispatcher
from arvis.tools.http import HttpToolConfig, http_tool
from arvis.tools.limits import MAX_MESSAGE_CHARS
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import McpTool
from arvis.tools.mcp.upstream import UpstreamUnavailable
from arvis.tools.outcome import DispatchOutcome
from arvis.tools.registry import parse_tools_config
from arvis.tools.remote import HTTP_KIND, MCP_KIND
from tests.support.fakes import definition, invocation

NAME = "crm.update"


def http_entry(**fields: object) -> dict[str, object]:
    return {
        "name": NAME,
        "description": "Update a CRM record.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "idempotent",
        **fields,
    }


def mcp_entry(**fields: object) -> dict[str, object]:
    return {"name": "crm", "url": "https://crm.example/mcp", **fields}


def refusal(section: str, entry: dict[str, object]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({section: [entry]})
    # The entry's place differs by kind ("http.0.headers" / "mcp.0.headers"); the rule does not.
    return str(caught.value).split(": ", 1)[1]


@pytest.mark.parametrize(
    "fields",
    [
        {"headers": {"X-Api-Token": "plain"}},
        {"headers": {"X-Zone": "eu\r\nX-Injected: 1"}},
        {"headers": {"X Zone": "eu"}},
        {"headers": {"X-Zone": "eu"}, "headers_env": {"x-zone": "ZONE"}},
        {"headers_env": {"X-Zone": "not a variable"}},
    ],
)
def test_the_same_bad_header_gets_the_same_message_from_both_kinds(
    fields: dict[str, object],
) -> None:
    assert refusal("http", http_entry(**fields)) == refusal("mcp", mcp_entry(**fields))


def test_a_header_either_transport_owns_is_reserved_by_both_naming_who_sets_it() -> None:
    for header in ("Host", "Content-Length", "Transfer-Encoding"):
        fields = {"headers": {header: "x"}}
        assert "set by ARVIS" in refusal("http", http_entry(**fields))
        assert "set by the MCP transport" in refusal("mcp", mcp_entry(**fields))


def test_auth_beside_an_authorization_header_gets_the_same_message_from_both_kinds() -> None:
    exchange = {
        "token_endpoint": "https://idp.example/token",
        "audience": "crm",
        "client_id": "arvis",
        "client_secret_env": "CRM_SECRET",
    }
    fields = {"headers_env": {"authorization": "CRM_TOKEN"}, "auth": {"token_exchange": exchange}}
    http, mcp = refusal("http", http_entry(**fields)), refusal("mcp", mcp_entry(**fields))
    assert http == mcp
    assert "auth sends the exchanged token as Authorization" in http


@pytest.mark.parametrize("section", ["http", "mcp"])
def test_an_answer_declared_twice_is_refused_by_both_kinds(section: str) -> None:
    if section == "http":
        entry = http_entry(not_started_statuses=[409, 409])
    else:
        entry = mcp_entry(not_started_codes=[409, 409])
    assert "listed twice" in refusal(section, entry)


class _Upstream:
    def __init__(self, answer: Callable[[], Any], declared: list[int]) -> None:
        self.answer = answer
        self.config = McpServerConfig(name="crm", command=["crm"], not_started_codes=declared)
        self.name = "crm"

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any], caller: object = None
    ) -> Any:
        return self.answer()


def _raise(error: BaseException) -> Callable[[], Any]:
    def answer() -> Any:
        raise error

    return answer


async def _over_http(event: str, declared: list[int]) -> DispatchOutcome:
    def handler(request: httpx.Request) -> httpx.Response:
        if event == "refused":
            raise httpx.ConnectError("refused", request=request)
        if event == "timeout":
            raise httpx.ReadTimeout("late", request=request)
        return httpx.Response(409)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = HttpToolConfig.model_validate(http_entry(not_started_statuses=declared))
    built = http_tool(config, client, source="test", environ={})
    return await ToolDispatcher([built]).dispatch(invocation(NAME))


async def _over_mcp(event: str, declared: list[int]) -> DispatchOutcome:
    answers = {
        "refused": _raise(UpstreamUnavailable("crm", "could not connect")),
        "timeout": _raise(TimeoutError()),
        "answer": _raise(MCPError(code=409, message="")),
    }
    upstream = _Upstream(answers[event], declared)
    built = McpTool(definition(NAME), upstream, "update")  # type: ignore[arg-type]
    return await ToolDispatcher([built]).dispatch(invocation(NAME))


def _said(outcome: DispatchOutcome, party: str) -> tuple[Any, ...]:
    if outcome.failure is not None:
        told = (outcome.failure.code, outcome.failure.message, outcome.failure.retryable)
    else:
        assert outcome.result is not None
        assert outcome.result.problem is not None
        told = (outcome.result.problem.code, outcome.result.problem.detail, None)
    code, message, retryable = told
    return outcome.boundary, code, message.replace(party, "<far side>"), retryable


@pytest.mark.parametrize(
    ("event", "declared", "boundary"),
    [
        ("refused", [], EffectBoundary.EFFECT_NOT_STARTED),
        ("answer", [], EffectBoundary.EFFECT_STATE_UNKNOWN),
        ("answer", [409], EffectBoundary.EFFECT_NOT_STARTED),
    ],
)
async def test_the_same_far_side_event_ends_the_same_way_for_both_kinds(
    event: str, declared: list[int], boundary: EffectBoundary
) -> None:
    over_http = _said(await _over_http(event, declared), HTTP_KIND.party)
    over_mcp = _said(await _over_mcp(event, declared), MCP_KIND.party)
    assert over_http[0] is over_mcp[0] is boundary
    codes = {HTTP_KIND.unreachable: "unreachable", MCP_KIND.unreachable: "unreachable"}
    codes |= {HTTP_KIND.answered: "answered", MCP_KIND.answered: "answered"}
    codes |= {HTTP_KIND.rejected: "rejected", MCP_KIND.rejected: "rejected"}
    assert codes[over_http[1]] == codes[over_mcp[1]]
    assert over_http[3] == over_mcp[3]
    if event == "answer":
        assert over_http[2] == over_mcp[2]


async def test_no_answer_names_what_happened_the_same_way_for_both_kinds() -> None:
    over_http = await _over_http("timeout", [])
    over_mcp = await _over_mcp("timeout", [])
    assert over_http.boundary is over_mcp.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert over_http.failure is not None
    assert over_mcp.failure is not None
    assert over_http.failure.code == HTTP_KIND.no_answer
    assert over_mcp.failure.code == MCP_KIND.no_answer
    assert over_http.failure.message == f"{NAME}: no complete answer (ReadTimeout)"
    assert over_mcp.failure.message == f"{NAME}: no complete answer (TimeoutError)"


async def test_a_long_far_side_message_is_cut_alike_for_both_kinds() -> None:
    upstream = _Upstream(_raise(MCPError(code=409, message="x" * 5000)), [409])
    built = McpTool(definition(NAME), upstream, "update")  # type: ignore[arg-type]
    outcome = await ToolDispatcher([built]).dispatch(invocation(NAME))
    assert outcome.result is not None
    assert outcome.result.problem is not None
    assert len(outcome.result.problem.detail) == MAX_MESSAGE_CHARS

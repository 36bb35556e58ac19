"""Remote HTTP tools: the invocation POSTed with its idempotency key (DESIGN §3),
their configuration, and the egress gate's reading of hosts."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.errors import ConfigurationError, DefinitionError
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.policy.policy import (
    PolicyConfig,
    PolicyQuery,
    RulePolicy,
    TenantRules,
    egress_host,
    parse_policy_config,
)
from arvis.tools import ToolDispatcher, ToolHost, build_tool_set
from arvis.tools.http import HttpTool, HttpToolConfig, http_tool
from arvis.tools.plans import RetiredPlanDispatcher
from arvis.tools.registry import parse_tools_config
from tests.support.fakes import context, invocation

Handler = Callable[[httpx.Request], httpx.Response]


def fields(**overrides: object) -> dict[str, object]:
    declared: dict[str, object] = {
        "name": "crm.update",
        "description": "Update a CRM record.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "idempotent",
    }
    declared.update(overrides)
    return declared


def tool(
    handler: Handler,
    environ: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    **overrides: object,
) -> HttpTool:
    client = client or httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = HttpToolConfig.model_validate(fields(**overrides))
    return http_tool(config, client, source="test", environ=environ or {})


def config_error(**overrides: object) -> str:
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({"http": [fields(**overrides)]})
    return str(caught.value)


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


@pytest.mark.parametrize("status", [301, 303, 400, 404, 409, 422, 429, 500, 503])
async def test_any_answer_but_a_result_proves_the_call_arrived_so_it_is_unknown(
    status: int,
) -> None:
    outcome = await ToolDispatcher([tool(lambda r: httpx.Response(status))]).dispatch(
        invocation("crm.update")
    )
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert outcome.failure is not None
    assert outcome.failure.code == "remote_failed"
    assert str(status) in outcome.failure.message


async def test_a_status_the_operator_declared_is_a_problem_not_started() -> None:
    declared = tool(lambda r: httpx.Response(422), not_started_statuses=[400, 422])
    outcome = await ToolDispatcher([declared]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.result is not None
    assert outcome.result.problem is not None
    assert outcome.result.problem.code == "remote_rejected"
    other = tool(lambda r: httpx.Response(404), not_started_statuses=[400, 422])
    unknown = await ToolDispatcher([other]).dispatch(invocation("crm.update"))
    assert unknown.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


async def test_a_read_that_got_an_error_answer_did_not_start_anything() -> None:
    reader = tool(lambda r: httpx.Response(500), effect="read_only", replay_safety="safe")
    outcome = await ToolDispatcher([reader]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.retryable


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [([200], "not an error status"), ([302], "not an error status"), ([400, 400], "twice")],
)
def test_only_error_statuses_can_be_declared_not_started(
    statuses: list[int], expected: str
) -> None:
    message = config_error(not_started_statuses=statuses)
    assert message.startswith("[tools] http.0.not_started_statuses")
    assert expected in message


@pytest.mark.parametrize(
    ("response", "value"),
    [(httpx.Response(202, json={"job": "j-1"}), {"job": "j-1"}), (httpx.Response(202), None)],
)
async def test_202_accepted_is_work_that_started_and_keeps_its_receipt(
    response: httpx.Response, value: Any
) -> None:
    outcome = await ToolDispatcher([tool(lambda r: response)]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_STARTED
    assert outcome.result is not None
    assert outcome.result.value == value


async def test_a_read_answered_202_did_not_start_anything() -> None:
    reader = tool(lambda r: httpx.Response(202), effect="read_only", replay_safety="safe")
    outcome = await ToolDispatcher([reader]).dispatch(invocation("crm.update"))
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.code == "invalid_remote_response"


async def test_a_200_body_cannot_claim_to_be_accepted_work() -> None:
    answer = httpx.Response(200, json={"value": 1, "pending": True})
    outcome = await ToolDispatcher([tool(lambda r: answer)]).dispatch(invocation("crm.update"))
    assert outcome.failure is not None
    assert outcome.failure.code == "invalid_remote_response"


def test_a_contradictory_http_tool_names_the_tool_rule_and_entry() -> None:
    with pytest.raises(DefinitionError, match=r"crm\.update.*read_only.*test"):
        tool(
            lambda r: httpx.Response(200),
            effect="read_only",
            replay_safety="safe",
            capabilities=["network.access"],
        )


async def test_http_tools_are_declared_in_the_tools_section(tmp_path: Path) -> None:
    entry = {
        "name": "crm.update",
        "description": "Update.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "unsafe",
    }
    async with httpx.AsyncClient() as client:
        host = ToolHost(sandbox_dir=tmp_path, http=client)
        tools = build_tool_set({"http": [entry]}, host)
    assert "crm.update" in [t.name for t in tools]


async def test_the_body_carries_the_whole_sealed_context_and_never_a_secret() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"value": None})

    remote = tool(handler, {"CRM_TOKEN": "tok-123"}, headers_env={"Authorization": "CRM_TOKEN"})
    await ToolDispatcher([remote]).dispatch(invocation("crm.update", {"id": 1}))
    body = json.loads(seen[0].content)
    assert body["context"] == context().model_dump(mode="json")
    assert seen[0].headers["Authorization"] == "tok-123"
    assert b"tok-123" not in seen[0].content


async def test_a_redirect_is_not_followed_to_a_host_egress_never_checked() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(307, headers={"Location": "https://evil.test/"})

    following = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=True)
    outcome = await ToolDispatcher([tool(handler, client=following)]).dispatch(
        invocation("crm.update")
    )
    assert seen == ["https://crm.example/arvis"]
    assert outcome.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN


@pytest.mark.parametrize(
    "header",
    [
        "Authorization",
        "proxy-authorization",
        "Cookie",
        "X-Api-Key",
        "X-Auth-Token",
        "X-Client-Secret",
        "X-Password",
        "x-upstream-TOKEN",
    ],
)
def test_a_credential_in_plain_headers_stops_start_up_pointing_at_headers_env(
    header: str,
) -> None:
    message = config_error(headers={header: "Bearer plaintext-value"})
    assert message.startswith("[tools] http.0.headers")
    assert header in message
    assert "headers_env" in message
    assert "plaintext-value" not in message


@pytest.mark.parametrize("header", ["Idempotency-Key", "content-type", "Host"])
def test_headers_arvis_sets_itself_cannot_be_configured(header: str) -> None:
    assert "set by ARVIS" in config_error(headers={header: "x"})
    assert "set by ARVIS" in config_error(headers_env={header: "SOME_VAR"})


def test_a_header_value_with_a_line_break_is_refused() -> None:
    assert "printable ASCII" in config_error(headers={"X-Zone": "eu\r\nX-Injected: 1"})


def test_a_header_in_both_headers_and_headers_env_is_refused() -> None:
    message = config_error(headers={"X-Zone": "eu"}, headers_env={"x-zone": "ZONE"})
    assert "both" in message


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://crm.example@evil.test/arvis", "userinfo"),
        ("https://user:pw@crm.example/arvis", "userinfo"),
        ("https://evil.test\\@crm.example/", "'\\'"),
        ("https://crm.example/arvis#frag", "fragment"),
        ("https:///arvis", "no host"),
        ("ftp://crm.example/", "should match pattern"),
    ],
)
def test_an_endpoint_whose_host_is_ambiguous_is_refused(url: str, expected: str) -> None:
    message = config_error(url=url)
    assert message.startswith("[tools] http.0.url")
    assert expected in message


def test_headers_env_values_come_from_the_injected_environment() -> None:
    remote = tool(
        lambda r: httpx.Response(200),
        {"CRM_TOKEN": "tok-1"},
        headers_env={"Authorization": "CRM_TOKEN"},
    )
    assert "tok-1" not in repr(remote)


@pytest.mark.parametrize("environ", [{}, {"CRM_TOKEN": "  "}])
def test_a_missing_headers_env_variable_stops_start_up_naming_tool_and_variable(
    environ: dict[str, str],
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        tool(lambda r: httpx.Response(200), environ, headers_env={"Authorization": "CRM_TOKEN"})
    message = str(caught.value)
    assert "\n" not in message
    assert "'crm.update'" in message
    assert "CRM_TOKEN" in message


def test_a_headers_env_value_with_a_line_break_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        tool(
            lambda r: httpx.Response(200),
            {"CRM_TOKEN": "tok-1\r\nX-Injected: yes"},
            headers_env={"Authorization": "CRM_TOKEN"},
        )
    assert "CRM_TOKEN" in str(caught.value)
    assert "tok-1" not in str(caught.value)


async def test_headers_env_reads_the_environment_the_tool_host_injects(tmp_path: Path) -> None:
    entry = fields(headers_env={"Authorization": "CRM_TOKEN"})
    async with httpx.AsyncClient() as client:
        host = ToolHost(sandbox_dir=tmp_path, http=client, environ={"CRM_TOKEN": "tok-9"})
        build_tool_set({"http": [entry]}, host)
        assert "tok-9" not in repr(host)
        bare = ToolHost(sandbox_dir=tmp_path, http=client)
        with pytest.raises(ConfigurationError, match=r"#1 tool 'crm.update'.*CRM_TOKEN"):
            build_tool_set({"http": [entry]}, bare)


# -- the egress gate's view of an HTTP tool ------------------------------------------


def test_the_dispatcher_exposes_an_http_tools_endpoint_as_its_destination() -> None:
    dispatcher = ToolDispatcher([tool(lambda r: httpx.Response(200))])
    assert dispatcher.destination("crm.update") == "https://crm.example/arvis"
    assert dispatcher.destination("other") is None


def test_a_retired_plan_reports_the_destination_of_the_dispatcher_that_runs_its_tool() -> None:
    moved = tool(lambda r: httpx.Response(200), url="https://crm.moved.example/arvis")
    current = ToolDispatcher([moved])
    unchanged = RetiredPlanDispatcher({"crm.update": moved.definition}, current)
    assert unchanged.destination("crm.update") == "https://crm.moved.example/arvis"
    changed_definition = tool(lambda r: httpx.Response(200), description="Changed.").definition
    changed = RetiredPlanDispatcher({"crm.update": changed_definition}, current)
    assert changed.destination("crm.update") is None  # it fails closed: plan_retired


def decide(tool_: HttpTool, egress: list[str], payload: Any = None) -> tuple[bool, str]:
    policy = RulePolicy(PolicyConfig(default=TenantRules(egress_hosts=egress)))
    decision = policy.evaluate(
        PolicyQuery(
            context(),
            tool_.definition,
            freeze_payload({} if payload is None else payload),
            destination=tool_.destination,
        )
    )
    return decision.allowed, decision.detail


@pytest.mark.parametrize(
    "overrides",
    [{}, {"effect": "read_only", "replay_safety": "safe"}],
    ids=["mutating", "read_only"],
)
def test_an_http_tool_is_checked_by_its_endpoints_host_not_its_payload(
    overrides: dict[str, str],
) -> None:
    remote = tool(lambda r: httpx.Response(200), **overrides)
    assert decide(remote, ["crm.example"]) == (True, "")
    allowed, detail = decide(remote, ["api.example.com"], {"url": "https://api.example.com/"})
    assert not allowed
    assert "crm.example" in detail


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://API.Example.COM/v1", "api.example.com"),
        ("https://api.example.com.:8443/v1", "api.example.com"),
        ("http://[::FFFF:7F00:1]:80/", "::ffff:7f00:1"),
        ("http://10.0.0.1/", "10.0.0.1"),
        ("https://bücher.example/", "xn--bcher-kva.example"),
        ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
        # Refused: each is read as one host by one client and as another by the next.
        ("http://api.example.com@evil.test/", None),
        ("http://evil.test\\@api.example.com/", None),
        ("http://api.example.com /", None),
        ("https://faß.de/", None),
        ("https://api\u3002example\u3002com/", None),
        ("http://127.1/", None),
        ("http://2130706433/", None),
        ("http://0x7f.0.0.1/", None),
        ("http://a..b/", None),
        ("http://%65vil.test/", None),
        ("http://api.example.com:99999/", None),
        ("mailto:ops@example.com", None),
        ("not a url", None),
    ],
)
def test_egress_reads_the_host_a_url_really_reaches_or_refuses(url: str, host: str | None) -> None:
    assert egress_host(url) == host


@pytest.mark.parametrize(
    ("pattern", "host", "allowed"),
    [
        ("api.example.com", "api.example.com", True),
        ("API.example.com.", "api.example.com", True),
        ("api.example.com", "api.example.com.evil.net", False),
        ("api.example.com", "evil-api.example.com", False),
        ("*.example.org", "a.b.example.org", True),
        ("*.example.org", "example.org", False),
        ("*.example.org", "badexample.org", False),
        ("bücher.example", "xn--bcher-kva.example", True),
        ("::1", "::1", True),
        ("[::1]", "::1", True),
        ("*", "10.0.0.1", True),
    ],
)
def test_egress_hosts_match_exactly_after_normalisation(
    pattern: str, host: str, allowed: bool
) -> None:
    authority = f"[{host}]" if ":" in host else host
    remote = tool(lambda r: httpx.Response(200), url=f"https://{authority}/arvis")
    assert decide(remote, [pattern])[0] is allowed


@pytest.mark.parametrize(
    "pattern",
    [
        "https://api.example.com",
        "api.example.com:443",
        "api.example.com/v1",
        "*.10.0.0.1",
        "user@api.example.com",
        "faß.de",
        "",
    ],
)
def test_an_egress_pattern_that_is_not_a_host_stops_start_up(pattern: str) -> None:
    with pytest.raises(ConfigurationError, match=r"\[policy\] default\.egress_hosts"):
        parse_policy_config({"default": {"egress_hosts": [pattern]}})

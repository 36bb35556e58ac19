"""Traces over HTTP and MCP against the real app and store (docs/telemetry.md).

The caller's W3C ``traceparent`` is continued by the fast lane, the FastAPI route and
``/mcp`` (in ``_meta`` or the headers); outgoing HTTP tool requests and upstream MCP calls
carry it on; nothing a caller sends, no result and no secret is put in a span; off by
default; and a configured OTLP exporter delivers the spans to a real collector endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from arvis.domain.apikeys import parse_token
from tests.support.http import Api, serve_api
from tests.support.httpserver import LocalHttpServer, Respond
from tests.support.mcp_client import Served, meta_of, notes_command, serve_arvis
from tests.support.tracing import (
    CALLER_SPAN_ID,
    CALLER_TRACE_ID,
    PHASES,
    TRACEPARENT,
    TRACESTATE,
    Recorded,
    every_value,
    parent_id,
    recorded,
    span_id,
    trace_id,
)

pytestmark = pytest.mark.db

REPO = Path(__file__).resolve().parents[2]
SECRET_ENV = "ARVIS_TEST_TRACING_CRM_TOKEN"
SECRET = "crm-secret-5150-do-not-trace"
PAYLOAD_MARKER = "payload-marker-8086"


def deployment(endpoint: str, notes_state: Path) -> str:
    return f"""
[[tools.http]]
name = "crm.update"
description = "Update a CRM record."
url = "{endpoint}"
effect = "mutating"
replay_safety = "idempotent"
headers_env = {{ Authorization = "{SECRET_ENV}" }}

[[tools.mcp]]
name = "notes"
command = {notes_command(notes_state)}
[tools.mcp.overrides.add_note]
replay_safety = "idempotent"

[policy.default]
egress_hosts = ["127.0.0.1"]
consent_for_mutating_unsafe = false
"""


def body(tool: str, payload: dict[str, Any], causal_id: str, run_id: str = "run-trace") -> Any:
    return {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": causal_id,
        "decision": {"tool": tool, "payload": payload},
    }


def traced_headers(api: Api, **extra: str) -> dict[str, str]:
    return {**api.auth(), "traceparent": TRACEPARENT, "tracestate": TRACESTATE, **extra}


@pytest.fixture(scope="module")
async def endpoint() -> AsyncIterator[LocalHttpServer]:
    async with LocalHttpServer() as running:
        yield running


@pytest.fixture(scope="module")
def notes_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes-state")


@pytest.fixture(scope="module")
def spans() -> Recorded:
    return recorded()


@pytest.fixture(scope="module")
async def api(
    database_url: str,
    endpoint: LocalHttpServer,
    notes_state: Path,
    spans: Recorded,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Api]:
    os.environ[SECRET_ENV] = SECRET
    try:
        async with serve_api(
            database_url,
            tmp_path_factory.mktemp("arvis-traced"),
            config=deployment(endpoint.url(), notes_state),
            tracing=spans.tracing,
        ) as served:
            yield served
    finally:
        del os.environ[SECRET_ENV]


@pytest.fixture(autouse=True)
def fresh(spans: Recorded) -> None:
    spans.clear()


async def test_a_fast_lane_syscall_continues_the_callers_trace(api: Api, spans: Recorded) -> None:
    with api.routed() as routed:
        answer = await api.client.post(
            "/v1/syscalls",
            json=body("echo", {"text": "hi"}, "c-fast"),
            headers=traced_headers(api),
        )
    assert answer.status_code == 200, answer.text
    assert routed == []  # the fast lane answered

    root = spans.one("execute_tool echo")
    assert (trace_id(root), parent_id(root)) == (CALLER_TRACE_ID, CALLER_SPAN_ID)
    assert spans.children(root) == list(PHASES)
    attributes = root.attributes or {}
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "echo"
    assert attributes["gen_ai.tool.call.id"] == "c-fast"
    assert attributes["arvis.outcome"] == "executed"
    assert attributes["arvis.boundary"] == "EFFECT_COMPLETED"
    assert attributes["arvis.idempotency_key"] == answer.json()["idempotency_key"]
    assert attributes["arvis.journal_position"] == answer.json()["journal_position"]
    assert attributes["arvis.run_id"] == "run-trace"
    assert attributes["arvis.tenant_id"] == "acme"


async def test_the_fastapi_route_continues_the_callers_trace_too(
    database_url: str, tmp_path: Path
) -> None:
    spans = recorded()
    async with serve_api(database_url, tmp_path, fast_lane=False, tracing=spans.tracing) as api:
        with api.routed() as routed:
            answer = await api.client.post(
                "/v1/syscalls",
                json=body("echo", {"text": "routed"}, "c-routed"),
                headers=traced_headers(api),
            )
        assert answer.status_code == 200, answer.text
        assert routed == ["/v1/syscalls"]
    root = spans.one("execute_tool echo")
    assert (trace_id(root), parent_id(root)) == (CALLER_TRACE_ID, CALLER_SPAN_ID)
    assert spans.children(root) == list(PHASES)


@pytest.mark.parametrize(
    "traceparent",
    ["garbage", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01" + "0" * 300, f"00-{'0' * 32}-1-01"],
)
async def test_a_malformed_traceparent_starts_a_new_trace_and_the_call_still_runs(
    api: Api, spans: Recorded, traceparent: str
) -> None:
    answer = await api.client.post(
        "/v1/syscalls",
        json=body("echo", {}, f"c-bad-{len(traceparent)}"),
        headers={**api.auth(), "traceparent": traceparent},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"] == "executed"
    root = spans.one("execute_tool echo")
    assert root.parent is None
    assert trace_id(root) != CALLER_TRACE_ID


async def test_an_http_tool_request_carries_the_trace_to_its_endpoint(
    api: Api, spans: Recorded, endpoint: LocalHttpServer
) -> None:
    answer = await api.client.post(
        "/v1/syscalls",
        json=body("crm.update", {"id": 7}, "c-http"),
        headers=traced_headers(api),
    )
    assert answer.json()["boundary"] == "EFFECT_COMPLETED", answer.text
    dispatch = spans.one("arvis.dispatch")
    request = endpoint.received[-1]
    assert request.headers["traceparent"] == f"00-{CALLER_TRACE_ID}-{span_id(dispatch)}-01"
    assert request.headers["tracestate"] == TRACESTATE
    assert request.headers["authorization"] == SECRET


async def test_an_upstream_mcp_call_carries_the_trace_in_its_meta(
    api: Api, spans: Recorded, notes_state: Path
) -> None:
    answer = await api.client.post(
        "/v1/syscalls",
        json=body("notes.add_note", {"text": "traced"}, "c-mcp-up"),
        headers=traced_headers(api),
    )
    assert answer.json()["boundary"] == "EFFECT_COMPLETED", answer.text
    dispatch = spans.one("arvis.dispatch")
    calls = [json.loads(line) for line in (notes_state / "calls.jsonl").read_text().splitlines()]
    meta = calls[-1]["meta"]
    assert meta["traceparent"] == f"00-{CALLER_TRACE_ID}-{span_id(dispatch)}-01"
    assert meta["arvis.dev/idempotency_key"] == answer.json()["idempotency_key"]


async def test_no_payload_result_key_or_secret_is_in_any_span(
    api: Api, spans: Recorded, endpoint: LocalHttpServer
) -> None:
    endpoint.then(Respond(200, {"value": {"echoed": f"result-{PAYLOAD_MARKER}"}}))
    payload = {"text": PAYLOAD_MARKER, "token": "sk-live-payload-secret"}
    tools = ["echo", "crm.update", "notes.add_note", "files.append"]
    for index, tool in enumerate(tools):
        answer = await api.client.post(
            "/v1/syscalls",
            json=body(tool, {**payload, "path": "t.txt", "line": PAYLOAD_MARKER}, f"c-s-{index}"),
            headers=traced_headers(api),
        )
        assert answer.status_code in (200, 202), answer.text
    token = api.tokens["acme:agent"]
    # The whole secret, as the key store reads it: its url-safe base64 may hold an ``_``,
    # and a short tail after the last one turns up in any hex digest by chance.
    presented = parse_token(token)
    assert presented is not None
    forbidden = (PAYLOAD_MARKER, "sk-live-payload-secret", token, presented.secret, SECRET)
    leaked = [
        (span, key)
        for span, key, value in every_value(spans.spans)
        if any(text in str(value) for text in forbidden)
    ]
    assert leaked == []
    keys = {key for _, key, _ in every_value(spans.spans)}
    assert not keys & {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}
    assert [len(spans.named(f"execute_tool {tool}")) for tool in tools] == [1, 1, 1, 1]


@pytest.fixture(scope="module")
def mcp_spans() -> Recorded:
    return recorded()


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, mcp_spans: Recorded
) -> Iterator[Served]:
    with serve_arvis(
        database_url, tmp_path_factory.mktemp("arvis-mcp-traced"), tracing=mcp_spans.tracing
    ) as running:
        yield running


async def test_mcp_meta_traceparent_continues_the_callers_trace(
    served: Served, mcp_spans: Recorded
) -> None:
    mcp_spans.clear()
    async with served.client() as client:
        answer = await client.call_tool(
            "echo", {"n": 1}, meta={"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
        )
    assert meta_of(answer)["arvis.dev/outcome"] == "executed"
    root = mcp_spans.one("execute_tool echo")
    assert (trace_id(root), parent_id(root)) == (CALLER_TRACE_ID, CALLER_SPAN_ID)
    assert mcp_spans.children(root) == list(PHASES)


async def test_mcp_without_meta_continues_the_traceparent_header(
    served: Served, mcp_spans: Recorded
) -> None:
    mcp_spans.clear()
    async with served.client(headers={"traceparent": TRACEPARENT}) as client:
        await client.call_tool("echo", {"n": 2})
    root = mcp_spans.one("execute_tool echo")
    assert (trace_id(root), parent_id(root)) == (CALLER_TRACE_ID, CALLER_SPAN_ID)


async def test_a_malformed_meta_traceparent_starts_a_new_trace(
    served: Served, mcp_spans: Recorded
) -> None:
    mcp_spans.clear()
    async with served.client(headers={"traceparent": TRACEPARENT}) as client:
        answer = await client.call_tool("echo", {"n": 3}, meta={"traceparent": 12})
    assert meta_of(answer)["arvis.dev/outcome"] == "executed"
    assert mcp_spans.one("execute_tool echo").parent is None


async def test_configured_otlp_export_delivers_the_spans_to_a_collector(
    database_url: str, tmp_path: Path
) -> None:
    async with LocalHttpServer() as collector:
        for _ in range(5):
            collector.then(Respond(200, None))
        config = f"""
[telemetry]
enabled = true
service_name = "arvis-e2e"
endpoint = "{collector.url("/v1/traces")}"
"""
        async with serve_api(database_url, tmp_path, config=config) as api:
            assert api.app.state.kernel.tracing is not None
            answer = await api.client.post(
                "/v1/syscalls",
                json=body("echo", {"text": "exported"}, "c-otlp"),
                headers=traced_headers(api),
            )
            assert answer.status_code == 200, answer.text
        # Closing the kernel flushed the batch.
        exports = [r for r in collector.received if r.path == "/v1/traces"]
    assert exports, "nothing reached the collector"
    assert exports[0].headers["content-type"] == "application/x-protobuf"
    sent: dict[str, Any] = {}
    for export in exports:
        request = ExportTraceServiceRequest()
        request.ParseFromString(export.body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    sent[span.name] = (resource["service.name"], span)
    service, root = sent["execute_tool echo"]
    assert service == "arvis-e2e"
    assert root.trace_id.hex() == CALLER_TRACE_ID
    assert root.parent_span_id.hex() == CALLER_SPAN_ID
    assert set(PHASES) <= set(sent)


def test_tracing_is_off_by_default_and_the_sdk_is_never_loaded(
    database_url: str, tmp_path: Path
) -> None:
    code = f"""
    import asyncio, sys
    from pathlib import Path
    from tests.support.http import serve_api

    async def main():
        async with serve_api({database_url!r}, Path({str(tmp_path)!r})) as api:
            assert api.app.state.kernel.tracing is None
            assert api.app.state.kernel.lifecycle.handler.tracer is None
            answer = await api.syscall("echo", {{"x": 1}}, run_id="run-off", causal_id="c-off")
            assert answer.status_code == 200, answer.text
            answer = await api.client.post(
                "/v1/syscalls",
                json={{"name": "tool.execute", "run_id": "run-off", "causal_id": "c-off-2",
                      "decision": {{"tool": "echo", "payload": {{}}}}}},
                headers={{**api.auth(), "traceparent": {TRACEPARENT!r}}},
            )
            assert answer.status_code == 200, answer.text

    asyncio.run(main())
    print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk",
        "opentelemetry.exporter", "arvis.telemetry.tracing"))))
    """
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_broken_telemetry_section_stops_serve_with_one_line_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "arvis.toml"
    config.write_text('[telemetry]\nenabled = "maybe"\n')
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ARVIS_"))}
    done = subprocess.run(
        [sys.executable, "-m", "arvis", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **environ,
            "ARVIS_CONFIG": str(config),
            "ARVIS_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": str(REPO),
        },
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "[telemetry] enabled" in lines[0]

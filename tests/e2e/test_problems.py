"""Anything a client can send gets a problem with a stable code, and journals nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arvis.serving.app import create_app
from tests.support.http import Api

VALID = {
    "name": "tool.execute",
    "run_id": "run-problems",
    "causal_id": "c-1",
    "decision": {"tool": "echo", "payload": {"x": 1}},
}


def _with(**changes: Any) -> dict[str, Any]:
    body = json.loads(json.dumps(VALID))
    for dotted, value in changes.items():
        target = body
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[part]
        target[last] = value
    return body


def _problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    assert body["type"] == f"urn:arvis:problem:{code}"
    return body


@pytest.mark.parametrize(
    "raw",
    [b"{", b"{'name': 1}", b"not json", b'{"name": "tool.execute",}', b"\xff\xfe"],
    ids=["truncated", "single-quotes", "text", "trailing-comma", "not-utf8"],
)
async def test_malformed_json_is_400_malformed_body(api: Api, raw: bytes) -> None:
    before = api.journal_count()
    response = await api.client.post(
        "/v1/syscalls",
        content=raw,
        headers={**api.auth(), "Content-Type": "application/json"},
    )
    _problem(response, 400, "malformed_body")
    assert api.journal_count() == before


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (_with(run_id=7), "body.run_id"),
        (_with(run_id="has space"), "body.run_id"),
        (_with(run_id="x" * 129), "body.run_id"),
        (_with(causal_id=None), "body.causal_id"),
        (_with(name="tool.delete"), "body.name"),
        (_with(decision__payload=[1, 2]), "body.decision.payload"),
        (_with(decision__tool=""), "body.decision.tool"),
        (_with(surprise=True), "body.surprise"),
        (_with(decision__extra="x"), "body.decision.extra"),
        ([VALID], "body"),
        ("tool.execute", "body"),
    ],
    ids=[
        "run-id-int",
        "run-id-space",
        "run-id-long",
        "causal-id-null",
        "unknown-syscall",
        "payload-array",
        "empty-tool",
        "unknown-field",
        "unknown-decision-field",
        "array-body",
        "string-body",
    ],
)
async def test_an_invalid_body_is_422_with_field_paths(api: Api, body: Any, path: str) -> None:
    before = api.journal_count()
    response = await api.client.post("/v1/syscalls", json=body, headers=api.auth())
    problem = _problem(response, 422, "validation_error")
    assert path in [error["path"] for error in problem["errors"]], problem
    assert api.journal_count() == before


async def test_a_validation_problem_never_echoes_the_input(api: Api) -> None:
    body = _with(run_id={"secret": "hunter2"})
    response = await api.client.post("/v1/syscalls", json=body, headers=api.auth())
    _problem(response, 422, "validation_error")
    assert "hunter2" not in response.text


async def test_a_missing_body_is_a_problem(api: Api) -> None:
    response = await api.client.post("/v1/syscalls", headers=api.auth())
    _problem(response, 422, "validation_error")


async def test_a_payload_that_is_not_plain_json_is_422_payload_invalid(api: Api) -> None:
    before = api.journal_count()
    raw = json.dumps(_with(decision__payload={"x": float("nan")})).encode()
    assert b"NaN" in raw
    response = await api.client.post(
        "/v1/syscalls", content=raw, headers={**api.auth(), "Content-Type": "application/json"}
    )
    _problem(response, 422, "payload_invalid")
    assert api.journal_count() == before


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", ""]
)
async def test_a_body_that_is_not_json_is_415(api: Api, content_type: str) -> None:
    before = api.journal_count()
    headers = {**api.auth(), "Content-Type": content_type}
    response = await api.client.post("/v1/syscalls", content=json.dumps(VALID), headers=headers)
    _problem(response, 415, "unsupported_media_type")
    assert api.journal_count() == before


async def test_json_with_a_charset_and_vendor_json_types_are_accepted(api: Api) -> None:
    types = ("application/json; charset=utf-8", "application/vnd.arvis+json")
    for n, content_type in enumerate(types):
        body = _with(causal_id=f"c-media-{n}")
        response = await api.client.post(
            "/v1/syscalls",
            content=json.dumps(body),
            headers={**api.auth(), "Content-Type": content_type},
        )
        assert response.status_code == 200, response.text


async def test_an_oversized_body_is_413_and_journals_nothing(api: Api) -> None:
    before = api.journal_count()
    body = _with(decision__payload={"blob": "x" * (70 * 1024)})
    response = await api.client.post("/v1/syscalls", json=body, headers=api.auth())
    _problem(response, 413, "body_too_large")
    assert api.journal_count() == before


async def _raw_asgi(
    app: Any, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[int, dict[str, Any]]:
    """Drive the app directly, streaming the body in chunks (no client to fix the length)."""
    pending = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/syscalls",
        "raw_path": b"/v1/syscalls",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("arvis.test", 80),
    }
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body)


@pytest.mark.parametrize("declared", [None, b"100"], ids=["no-length", "lying-length"])
async def test_the_limit_holds_while_streaming_whatever_content_length_says(
    api: Api, declared: bytes | None
) -> None:
    before = api.journal_count()
    headers = [
        (b"host", b"arvis.test"),
        (b"content-type", b"application/json"),
        (b"authorization", api.auth()["Authorization"].encode()),
    ]
    if declared is not None:
        headers.append((b"content-length", declared))
    chunks = [b'{"name":"tool.execute","pad":"'] + [b"x" * 16384] * 8 + [b'"}']
    status, body = await _raw_asgi(api.app, headers, chunks)
    assert status == 413
    assert body["code"] == "body_too_large"
    assert api.journal_count() == before


async def test_a_declared_length_over_the_limit_is_refused_before_reading(api: Api) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(10 * 1024 * 1024).encode()),
    ]
    status, body = await _raw_asgi(api.app, headers, [b"{"])
    assert (status, body["code"]) == (413, "body_too_large")


async def test_unknown_routes_and_methods_are_problems(api: Api) -> None:
    _problem(await api.client.get("/v1/nothing", headers=api.auth()), 404, "not_found")
    _problem(await api.client.get("/v1/syscalls", headers=api.auth()), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "after=-1", "limit=ten"], ids=lambda q: q
)
async def test_journal_paging_is_bounded(api: Api, query: str) -> None:
    response = await api.client.get(
        f"/v1/runs/run-problems/journal?{query}", headers=api.auth("acme:auditor")
    )
    _problem(response, 422, "validation_error")


async def test_a_deny_reason_is_bounded_and_unknown_fields_are_refused(api: Api) -> None:
    for body in ({"reason": "x" * 501}, {"reason": "ok", "extra": 1}):
        response = await api.client.post(
            "/v1/confirmations/cnf_x/deny", json=body, headers=api.auth("acme:approver")
        )
        _problem(response, 422, "validation_error")


async def test_an_unexpected_error_is_a_generic_500_without_its_text(api: Api) -> None:
    app = create_app(max_body_bytes=1024)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals")

    import httpx

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/boom")
    problem = _problem(response, 500, "internal_error")
    assert "secret internals" not in response.text
    assert problem["detail"] == "the request could not be completed"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_with(decision__tool="ec\x00ho"), "validation_error"),
        (_with(decision__payload={"k": ["a\x00b"]}), "payload_invalid"),
        (_with(decision__payload={"k\x00": 1}), "payload_invalid"),
    ],
    ids=["tool", "payload-value", "payload-key"],
)
async def test_a_nul_character_is_refused_before_governance(api: Api, body: Any, code: str) -> None:
    before = api.journal_count()
    response = await api.client.post("/v1/syscalls", json=body, headers=api.auth())
    _problem(response, 422, code)
    assert api.journal_count() == before


async def _pending_confirmation(api: Api, causal_id: str) -> str:
    line = {"path": "notes.txt", "line": "awaiting consent"}
    asked = await api.syscall("files.append", line, run_id="run-reasons", causal_id=causal_id)
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    return str(asked.json()["confirmation"]["id"])


@pytest.mark.parametrize(
    "raw",
    [b'{"reason": "no\\u0000way"}', b'{"reason": "no\\ud800way"}'],
    ids=["nul", "lone-surrogate"],
)
async def test_a_deny_reason_that_cannot_be_stored_is_422_and_changes_nothing(
    api: Api, raw: bytes
) -> None:
    confirmation_id = await _pending_confirmation(api, f"c-reason-{len(raw)}-{raw[-8:].hex()}")
    approver = {**api.auth("acme:approver"), "Content-Type": "application/json"}
    for action in ("deny", "approve"):
        response = await api.client.post(
            f"/v1/confirmations/{confirmation_id}/{action}", content=raw, headers=approver
        )
        problem = _problem(response, 422, "validation_error")
        assert [error["path"] for error in problem["errors"]] == ["body.reason"], problem
    listed = await api.client.get("/v1/confirmations?state=PENDING", headers=approver)
    assert confirmation_id in [c["id"] for c in listed.json()["confirmations"]]


@pytest.mark.parametrize("dots", [".", ".."])
@pytest.mark.parametrize("field", ["run_id", "causal_id"])
async def test_a_dot_segment_id_in_a_syscall_is_422(api: Api, field: str, dots: str) -> None:
    before = api.journal_count()
    response = await api.client.post(
        "/v1/syscalls", json=_with(**{field: dots}), headers=api.auth()
    )
    problem = _problem(response, 422, "validation_error")
    assert f"body.{field}" in [error["path"] for error in problem["errors"]]
    assert api.journal_count() == before


@pytest.mark.parametrize("encoded", ["%2e", "%2e%2e", "%2E%2E", ".%2e"])
@pytest.mark.parametrize(
    ("method", "template", "who"),
    [
        ("GET", "/v1/runs/{}/journal", "acme:auditor"),
        ("GET", "/v1/runs/{}/verify", "acme:auditor"),
        ("POST", "/v1/runs/{}/replay", "acme:auditor"),
        ("POST", "/v1/confirmations/{}/approve", "acme:approver"),
        ("POST", "/v1/confirmations/{}/deny", "acme:approver"),
        ("GET", "/v1/confirmations?after={}", "acme:approver"),
    ],
    ids=["journal", "verify", "replay", "approve", "deny", "list-after"],
)
async def test_a_dot_segment_id_in_a_path_is_422(
    api: Api, method: str, template: str, who: str, encoded: str
) -> None:
    response = await api.client.request(method, template.format(encoded), headers=api.auth(who))
    _problem(response, 422, "validation_error")


async def test_ids_that_merely_start_with_dots_are_still_ids(api: Api) -> None:
    response = await api.client.post(
        "/v1/syscalls", json=_with(run_id="...", causal_id=".hidden"), headers=api.auth()
    )
    assert response.status_code == 200, response.text
    journal = await api.client.get("/v1/runs/.../journal", headers=api.auth("acme:auditor"))
    assert [e["causal_id"] for e in journal.json()["entries"]] == [".hidden"]

"""Scenario 6: schemathesis over every route, then hand-written hostile requests.

No answer is a 5xx, nothing is journaled for a refused request, no file appears
outside the sandbox, and the process stays healthy.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from arvis.bootstrap import build_kernel
from arvis.serving.app import create_app
from arvis.store.engine import libpq_url
from tests.support.http import app_settings, mint_keys
from tests.support.reliability import report, size
from tests.support.server import running

pytestmark = [pytest.mark.db, pytest.mark.reliability]

EXAMPLES = size(ci=15, full=150)
MAX_BODY = 256 * 1024


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir: Path = tmp_path_factory.mktemp("arvis-hostile")
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",)))
    config = app_settings(database_url, data_dir, max_body_bytes=MAX_BODY)
    app = create_app(functools.partial(build_kernel, config), max_body_bytes=MAX_BODY)
    with running(app) as base_url:
        yield {"url": base_url, "tokens": tokens, "db": database_url, "data_dir": data_dir}


def _journal_count(url: str) -> int:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM journal_entries").fetchone()
    assert row is not None
    return int(row[0])


def raw_http(base_url: str, request: bytes, timeout_s: float = 30) -> tuple[int, bytes, bytes]:
    """Send bytes as they are; return (status, raw headers, body)."""
    where = urlsplit(base_url)
    with socket.create_connection((where.hostname, where.port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else -1
    return status, head, body


def _post(path: str, body: bytes, token: str, *, extra: bytes = b"") -> bytes:
    return (
        (
            f"POST {path} HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode()
        + extra
        + b"\r\n"
        + body
    )


def _syscall(tool: str, payload: Any, causal: str, run: str = "hostile-run") -> bytes:
    body = {
        "name": "tool.execute",
        "run_id": run,
        "causal_id": causal,
        "decision": {"tool": tool, "payload": payload},
    }
    return json.dumps(body).encode()


def _hostile(agent: str, admin: str) -> dict[str, bytes]:
    deep_list = b"[" * 100_000 + b"]" * 100_000
    deep_object = ('{"a":' * 5000 + "1" + "}" * 5000).encode()
    base = (
        b'{"name":"tool.execute","run_id":"hr","causal_id":"%s",'
        b'"decision":{"tool":"echo","payload":%s}}'
    )
    cases = {
        "deep nesting (100k arrays)": _post("/v1/syscalls", base % (b"deep1", deep_list), agent),
        "deep nesting (5k objects)": _post("/v1/syscalls", base % (b"deep2", deep_object), agent),
        "huge string under the body limit": _post(
            "/v1/syscalls", _syscall("echo", {"s": "x" * (MAX_BODY - 500)}, "huge1"), agent
        ),
        "huge string over the body limit": _post(
            "/v1/syscalls", _syscall("echo", {"s": "x" * (4 * MAX_BODY)}, "huge2"), agent
        ),
        "huge run id": _post("/v1/syscalls", _syscall("echo", {}, "c", run="r" * 100_000), agent),
        "invalid UTF-8": _post("/v1/syscalls", base % (b"utf8", b'"\xff\xfe\xc3\x28"'), agent),
        "lone surrogate escape": _post("/v1/syscalls", base % (b"sur", b'"\\ud800"'), agent),
        "NUL in a string": _post("/v1/syscalls", base % (b"nul", b'"a\\u0000b"'), agent),
        "duplicate JSON keys (top level)": _post(
            "/v1/syscalls",
            b'{"name":"tool.execute","run_id":"hr","run_id":"other","causal_id":"dup1",'
            b'"decision":{"tool":"echo","payload":{}}}',
            agent,
        ),
        "duplicate JSON keys (payload)": _post(
            "/v1/syscalls", base % (b"dup2", b'{"k":1,"k":2}'), agent
        ),
        "integer overflow in the payload": _post(
            "/v1/syscalls", base % (b"int1", b'{"n":' + b"9" * 400 + b"}"), agent
        ),
        "integer beyond 2^53 in the payload": _post(
            "/v1/syscalls", base % (b"int2", b'{"n":18446744073709551617}'), agent
        ),
        "float overflow in the payload": _post(
            "/v1/syscalls", base % (b"flt", b'{"n":1e999}'), agent
        ),
        "NaN in the payload": _post("/v1/syscalls", base % (b"nan", b'{"n":NaN}'), agent),
        "integer run id": _post(
            "/v1/syscalls",
            b'{"name":"tool.execute","run_id":18446744073709551617,"causal_id":"i",'
            b'"decision":{"tool":"echo","payload":{}}}',
            agent,
        ),
        "page size overflow": (
            "GET /v1/runs/hr/journal?after=99999999999999999999999&limit=-1 HTTP/1.1\r\n"
            f"Host: arvis\r\nConnection: close\r\nAuthorization: Bearer {admin}\r\n\r\n"
        ).encode(),
        "traversal in the run id path": (
            "GET /v1/runs/..%2F..%2Fetc%2Fpasswd/journal HTTP/1.1\r\n"
            f"Host: arvis\r\nConnection: close\r\nAuthorization: Bearer {admin}\r\n\r\n"
        ).encode(),
        "CRLF in the path": (
            "GET /v1/runs/hr%0d%0aSet-Cookie:%20evil=1/verify HTTP/1.1\r\n"
            f"Host: arvis\r\nConnection: close\r\nAuthorization: Bearer {admin}\r\n\r\n"
        ).encode(),
        "bare LF inside a header value": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"Authorization: Bearer " + agent.encode() + b"\nX-Injected: 1\r\n\r\n"
        ),
        "bare CR inside a header value": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"Authorization: Bearer x\rSet-Cookie: evil=1\r\n\r\n"
        ),
        "NUL inside a header value": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"Authorization: Bearer x\x00y\r\n\r\n"
        ),
        "non-ASCII bearer token": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"Authorization: Bearer arvis_k\xc3\xa9_\xff\xfe\r\n\r\n"
        ),
        "huge header": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"X-Big: " + b"a" * 200_000 + b"\r\n\r\n"
        ),
        "two Authorization headers": (
            b"GET /v1/tools HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
            b"Authorization: Bearer x\r\nAuthorization: Bearer " + agent.encode() + b"\r\n\r\n"
        ),
        # A NUL in a filter reached the database, which cannot hold one in text: a 5xx.
        **{
            f"NUL in the query of {path}": (
                f"GET {path} HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\n"
                f"Authorization: Bearer {admin}\r\n\r\n"
            ).encode()
            for path in (
                "/v1/runs?actor=a%00b",
                "/v1/runs?principal=%00",
                "/v1/runs?q=%00&tool=x",
                "/v1/runs?cursor=%00",
                "/v1/confirmations?after=%00",
                "/v1/keys?x=%00",
                "/console/runs?actor=%00",
            )
        },
        "Content-Length that is not a number": _post(
            "/v1/syscalls", b"{}", agent, extra=b"Content-Length: -5\r\n"
        ),
        "text/plain body": _post("/v1/syscalls", b"{}", agent).replace(
            b"application/json", b"text/plain"
        ),
    }
    for n, path in enumerate(
        [
            "../escape.txt",
            "/etc/passwd",
            "a/../../escape.txt",
            "..\\escape.txt",
            "sub/../../../x",
            "%2e%2e/escape.txt",
            "a\u0000b",
            ".",
            "",
            "x" * 5000,
        ]
    ):
        cases[f"traversal in files.write: {path[:20]!r}"] = _post(
            "/v1/syscalls",
            _syscall("files.write", {"path": path, "content": "owned"}, f"trav{n}"),
            agent,
        )
        cases[f"traversal in files.read: {path[:20]!r}"] = _post(
            "/v1/syscalls", _syscall("files.read", {"path": path}, f"travr{n}"), agent
        )
    return cases


def test_hostile_input_never_gets_a_5xx_nor_a_journal_entry(served: dict[str, Any]) -> None:
    url, db = served["url"], served["db"]
    agent = served["tokens"]["acme:agent"]
    outside = served["data_dir"] / "escape.txt"
    statuses: Counter[int] = Counter()
    journaled_refusals, injected, fivexx, crashed_tools = [], [], [], []
    duplicates_refused = 0
    ran = 0

    # 1. schemathesis over every operation, every role.
    admin = {"Authorization": f"Bearer {served['tokens']['acme:admin']}"}
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    for loaded in schema.get_all_operations():
        operation = loaded.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            before = _journal_count(db)
            response = case.call(headers=admin)
            statuses[response.status_code] += 1
            if response.status_code >= 500:
                fivexx.append(f"{case.method} {case.path}: {response.status_code}")
            if response.status_code >= 400 and _journal_count(db) != before:
                journaled_refusals.append(f"{case.method} {case.path}: {response.status_code}")
            case.validate_response(response, excluded_checks=[checks.positive_data_acceptance])

        fuzz()
        ran += 1

    # 2. hand-written hostile requests, bytes as they are.
    hostile = _hostile(agent, served["tokens"]["acme:admin"])
    for name, request in hostile.items():
        before = _journal_count(db)
        status, head, body = raw_http(url, request)
        statuses[status] += 1
        if name.startswith("duplicate JSON keys"):
            duplicates_refused += status == 400
        if b"files." in request and status == 200:
            answer = json.loads(body)
            # A refused path is a problem result the tool names, never a crash or an unknown.
            if (
                answer["boundary"] == "EFFECT_STATE_UNKNOWN"
                or (answer["problem"] or {}).get("code") == "tool_crashed"
            ):
                crashed_tools.append(name)
        if status >= 500 or status < 0:
            fivexx.append(f"{name}: {status} {body[:200]!r}")
        if status >= 400 and _journal_count(db) != before:
            journaled_refusals.append(f"{name}: {status}")
        lowered = head.lower()
        if b"set-cookie" in lowered or b"x-injected" in lowered:
            injected.append(name)

    sandbox = (served["data_dir"] / "sandbox").resolve()
    escaped = [
        p
        for p in served["data_dir"].resolve().rglob("*")
        if p.is_file() and sandbox not in p.parents and p.read_bytes() == b"owned"
    ]
    healthy = raw_http(url, b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")[0]
    works = raw_http(url, _post("/v1/syscalls", _syscall("echo", {"ok": 1}, "after"), agent))[0]
    report(
        f"bad-input: {ran} operations x {EXAMPLES} schemathesis examples + {len(hostile)} hostile"
        f" requests, {sum(statuses.values())} answers, {len(fivexx)} 5xx, {len(journaled_refusals)}"
        f" refused requests journaled, {len(injected)} injected headers,"
        f" {len(escaped)} files written outside the sandbox, {len(crashed_tools)} tool crashes,"
        f" {duplicates_refused}/2 duplicate-key bodies refused, healthy afterwards:"
        f" {healthy == 200 and works == 200}"
    )
    assert fivexx == []
    assert crashed_tools == []
    assert duplicates_refused == 2
    assert journaled_refusals == []
    assert injected == []
    assert not outside.exists()
    assert escaped == []
    assert not Path("/etc/owned").exists()
    assert healthy == 200
    assert works == 200
    assert ran >= 11

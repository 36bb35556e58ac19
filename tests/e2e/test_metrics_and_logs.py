"""``/metrics`` for admins, and one JSON access-log line per request without secrets."""

from __future__ import annotations

import json

import pytest

from tests.support.http import Api


async def test_metrics_count_syscalls_by_outcome_and_boundary(api: Api) -> None:
    await api.syscall("echo", {"m": 1}, run_id="run-metrics", causal_id="c-1")
    response = await api.client.get("/metrics", headers=api.auth("acme:admin"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'arvis_syscalls_total{boundary="EFFECT_COMPLETED",outcome="executed"}' in text
    for phase in ("admission", "dispatch", "journal", "total"):
        assert f'arvis_syscall_phase_seconds_count{{phase="{phase}"}} 1.0' in text
    assert "arvis_audit_incomplete_runs 0.0" in text


async def test_the_access_log_has_ids_and_a_key_id_but_no_token_or_payload(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="arvis.access"):
        await api.syscall("echo", {"password": "hunter2"}, run_id="run-log", causal_id="c-9")
    lines = [r for r in caplog.records if r.name == "arvis.access"]
    assert len(lines) == 1
    record = json.loads(lines[0].getMessage())
    token = api.tokens["acme:agent"]
    assert record["method"] == "POST"
    assert record["path"] == "/v1/syscalls"
    assert record["status"] == 200
    assert record["run_id"] == "run-log"
    assert record["causal_id"] == "c-9"
    assert record["key"] == token.split("_")[1]
    assert isinstance(record["duration_ms"], float)
    assert token.split("_", 2)[2] not in lines[0].getMessage()
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize(
    ("method", "route"),
    [
        ("GET", "journal"),
        ("GET", "verify"),
        ("GET", "checkpoints"),
        ("GET", "bundle"),
        ("POST", "replay"),
        ("POST", "attempts/k-none/1/resolve"),
    ],
)
async def test_every_run_route_names_its_run_on_the_access_log_line(
    api: Api, caplog: pytest.LogCaptureFixture, method: str, route: str
) -> None:
    """An operator greps the access log for a run: each run route's line names it, the
    refused ones too (an approver's resolve of an attempt that does not exist is 404)."""
    who = "acme:approver" if route.endswith("resolve") else "acme:auditor"
    body = {"as": "not_started", "evidence": "checked"} if route.endswith("resolve") else None
    with caplog.at_level("INFO", logger="arvis.access"):
        await api.client.request(
            method, f"/v1/runs/run-grep/{route}", headers=api.auth(who), json=body
        )
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "arvis.access"]
    assert [(line["path"], line["run_id"]) for line in lines] == [
        (f"/v1/runs/run-grep/{route}", "run-grep")
    ]

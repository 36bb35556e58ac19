"""``arvis serve --workers 2``: every line on stderr is JSON (the supervisor's too),
tracing says that it is on, and ``ARVIS_METRICS_PORT`` serves ``/metrics`` alone, with
no key, on the loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http import mint_keys
from tests.support.reliability import Served, auth, free_port, syscall_body, taken_port

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("arvis-metrics-port")
    # Tracing on with no exporter: spans stay in the process, and the log says so.
    (data_dir / "arvis.toml").write_text('[telemetry]\nenabled = true\nexporter = "none"\n')
    server = Served(
        database_url,
        data_dir,
        instance_id="metrics-port",
        args=["--workers", "2"],
        env={"ARVIS_METRICS_PORT": str(free_port()), "ARVIS_LOG_LEVEL": "INFO"},
    )
    server.start()
    try:
        yield server
    finally:
        server.terminate()


def _metrics_url(served: Served) -> str:
    return f"http://127.0.0.1:{served.env['ARVIS_METRICS_PORT']}"


def test_the_metrics_port_answers_metrics_with_no_key_and_nothing_else(
    served: Served, database_url: str
) -> None:
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent",)))
    answer = httpx.post(
        f"{served.base_url}/v1/syscalls",
        json=syscall_body("run-metrics-port", "c-1", "echo", {}),
        headers=auth(tokens["acme:agent"]),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text

    scraped = httpx.get(f"{_metrics_url(served)}/metrics", timeout=30)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    assert "arvis_audit_incomplete_runs" in scraped.text
    for path in ("/v1/tools", "/healthz", "/console"):
        other = httpx.get(f"{_metrics_url(served)}{path}", timeout=30)
        assert (other.status_code, other.json()["code"]) == (404, "not_found"), path
    # On the API's port /metrics still needs an admin key.
    assert httpx.get(f"{served.base_url}/metrics", timeout=30).status_code == 401


def _log_records(served: Served) -> list[dict[str, Any]]:
    log = served.data_dir / f"serve-{served.instance_id}.log"
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # a plain-text line fails here


def _tracing(records: list[dict[str, Any]]) -> int:
    return sum(r.get("message", "").startswith("tracing on:") for r in records)


def test_every_line_the_served_process_writes_is_json_and_tracing_says_it_is_on(
    served: Served,
) -> None:
    # Ready means one worker answers; the other may still be starting, so its lines are
    # waited for (a bounded while), not assumed written.
    records = _log_records(served)
    deadline = time.monotonic() + 60
    while _tracing(records) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        records = _log_records(served)

    serving = next(r for r in records if r.get("event") == "serving")
    assert serving["url"] == served.base_url
    assert serving["workers"] == 2
    assert serving["metrics_url"] == f"{_metrics_url(served)}/metrics"
    supervisor = [r for r in records if "parent process" in r.get("message", "")]
    assert supervisor, records
    tracing = [r for r in records if r.get("message", "").startswith("tracing on:")]
    assert len(tracing) == 2, records  # one per worker
    assert "no exporter" in tracing[0]["message"]


def test_a_metrics_port_that_is_taken_stops_serve_with_one_line(
    database_url: str, tmp_path: Path
) -> None:
    with taken_port() as port:
        env = {"ARVIS_METRICS_PORT": str(port)}
        server = Served(database_url, tmp_path, instance_id="metrics-taken", env=env)
        server.spawn()
        assert server.process is not None
        assert server.process.wait(timeout=120) == 1
    log = (tmp_path / "serve-metrics-taken.log").read_text()
    assert log.strip().splitlines()[-1] == (
        f"arvis: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )

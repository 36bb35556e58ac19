"""``arvis serve-turn RUN``: one instance per agent turn, against a shared PostgreSQL.

It says where it listens on one stdout line, admits its run's syscalls only, and on
SIGTERM stops admitting, lets what is in flight finish and journal, releases its lease
and exits 0 — 1 when something it admitted was not journaled within the grace period.
At start it settles what a killed instance left once that one's lease has expired.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.http import mint_keys
from tests.support.perturn import TurnInstance, turn_env
from tests.support.postgres import sql as _sql
from tests.support.reliability import auth, syscall_body
from tests.support.turntools import CONFIG

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def tokens(database_url: str) -> dict[str, str]:
    return asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent", "admin")))


def _instance(database_url: str, tmp_path: Path, run_id: str, **env: str) -> TurnInstance:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    return TurnInstance(
        run_id, turn_env(database_url, tmp_path, **env), tmp_path / f"turn-{run_id}.log"
    )


def _until(condition: Any, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _post_in_background(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {}

    def post() -> None:
        try:
            response = httpx.post(f"{url}/v1/syscalls", json=body, headers=auth(token), timeout=60)
            answer["status"], answer["text"] = response.status_code, response.text
            if response.headers.get("content-type", "").endswith("json"):
                answer["body"] = response.json()
        except httpx.TransportError as exc:
            answer["error"] = repr(exc)

    thread = threading.Thread(target=post)
    thread.start()
    answer["thread"] = thread
    return answer


def test_it_says_where_it_listens_serves_only_its_run_and_exits_0_on_sigterm(
    database_url: str, tmp_path: Path, tokens: dict[str, str]
) -> None:
    turn = _instance(database_url, tmp_path, "turn-a", ARVIS_INSTANCE_ID="agents").start()
    try:
        ready = turn.ready
        assert ready["run_id"] == "turn-a"
        assert ready["url"] == f"http://127.0.0.1:{ready['port']}"
        assert ready["lease"].startswith("agents/")
        assert ready["instance_id"] == "agents"
        assert ready["pid"] == turn.process.pid  # type: ignore[union-attr]

        mine = httpx.post(
            f"{turn.url}/v1/syscalls",
            json=syscall_body("turn-a", "c1", "echo", {"hi": 1}),
            headers=auth(tokens["acme:agent"]),
        )
        assert mine.status_code == 200, mine.text
        assert mine.json()["boundary"] == "EFFECT_COMPLETED"

        other = httpx.post(
            f"{turn.url}/v1/syscalls",
            json=syscall_body("another-run", "c1", "echo", {"hi": 1}),
            headers=auth(tokens["acme:agent"]),
        )
        assert other.status_code == 421, other.text
        assert other.headers["content-type"] == "application/problem+json"
        assert other.json()["code"] == "run_not_served"
        assert _sql(database_url, "SELECT count(*) FROM runs WHERE run_id = 'another-run'") == [
            (0,)
        ]
    finally:
        code, stopped = turn.stop()
    assert code == 0, turn.log()
    assert stopped == {
        "event": "stopped",
        "signal": "SIGTERM",
        "drained": True,
        "unjournaled": 0,
        "exit_code": 0,
    }
    released = _sql(
        database_url, "SELECT released FROM instance_leases WHERE instance_id = %s", ready["lease"]
    )
    assert released == [(True,)]


async def _mcp_calls(url: str, token: str, calls: list[dict[str, Any]]) -> list[Any]:
    """Each call (tool, arguments, meta) through the MCP SDK's client; an MCPError is
    answered as the error itself."""
    http = httpx2.AsyncClient(headers=auth(token))
    answers: list[Any] = []
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        for call in calls:
            try:
                answers.append(
                    await client.call_tool(call["tool"], call["args"], meta=call["meta"])
                )
            except MCPError as exc:
                answers.append(exc)
    return answers


def test_mcp_on_a_turn_instance_admits_its_run_only_and_defaults_to_it(
    database_url: str, tmp_path: Path, tokens: dict[str, str]
) -> None:
    turn = _instance(database_url, tmp_path, "turn-mcp").start()
    try:
        other, default = asyncio.run(
            _mcp_calls(
                turn.url,
                tokens["acme:agent"],
                [
                    {"tool": "echo", "args": {"hi": 1}, "meta": {"arvis.dev/run_id": "another"}},
                    {"tool": "echo", "args": {"hi": 2}, "meta": None},
                ],
            )
        )
        metrics = httpx.get(f"{turn.url}/metrics", headers=auth(tokens["acme:admin"]))
    finally:
        turn.stop()
    assert isinstance(other, MCPError), other
    assert other.error.data == {"code": "run_not_served"}
    assert _sql(database_url, "SELECT count(*) FROM runs WHERE run_id = 'another'") == [(0,)]
    # A call that names no run is the turn's (docs/mcp.md).
    assert not isinstance(default, MCPError), default
    assert default.meta["arvis.dev/run_id"] == "turn-mcp"
    assert default.meta["arvis.dev/outcome"] == "executed"
    # Counted like any syscall, whichever way it came in.
    assert 'arvis_syscall_errors_total{code="run_not_served"} 1.0' in metrics.text


def test_sigterm_lets_the_call_in_flight_finish_and_refuses_new_ones(
    database_url: str, tmp_path: Path, tokens: dict[str, str]
) -> None:
    turn = _instance(database_url, tmp_path, "turn-b").start()
    token = tokens["acme:agent"]
    slow = _post_in_background(
        turn.url, token, syscall_body("turn-b", "slow", "slow.write", {"seconds": 1.5})
    )
    _until(
        lambda: _sql(database_url, "SELECT count(*) FROM attempts WHERE run_id = 'turn-b'")[0][0],
        "the slow call was never admitted",
    )
    assert turn.process is not None
    turn.process.terminate()
    time.sleep(0.3)
    late = httpx.post(
        f"{turn.url}/v1/syscalls",
        json=syscall_body("turn-b", "late", "echo", {}),
        headers=auth(token),
    )
    assert late.status_code == 503, late.text
    assert late.json()["code"] == "shutting_down"
    code, stopped = turn.stop()
    slow["thread"].join(timeout=30)

    assert code == 0, turn.log()
    assert stopped is not None
    assert stopped["drained"] is True
    assert slow["status"] == 200, slow
    assert slow["body"]["boundary"] == "EFFECT_COMPLETED"
    rows = _sql(
        database_url,
        "SELECT causal_id, kind, boundary FROM journal_entries WHERE run_id = 'turn-b'",
    )
    assert rows == [("slow", "execution", "EFFECT_COMPLETED")]


def test_a_call_that_outlasts_the_grace_period_makes_it_exit_1(
    database_url: str, tmp_path: Path, tokens: dict[str, str]
) -> None:
    turn = _instance(database_url, tmp_path, "turn-c", ARVIS_SHUTDOWN_GRACE_S="0.5").start()
    slow = _post_in_background(
        turn.url,
        tokens["acme:agent"],
        syscall_body("turn-c", "slow", "slow.write", {"seconds": 20}),
    )
    _until(
        lambda: _sql(
            database_url,
            "SELECT count(*) FROM attempts WHERE run_id = 'turn-c' AND started_at IS NOT NULL",
        )[0][0],
        "the slow call never started",
    )
    code, stopped = turn.stop()
    slow["thread"].join(timeout=30)

    assert code == 1, turn.log()
    assert stopped is not None
    assert stopped["drained"] is False
    assert stopped["exit_code"] == 1
    # Cut off, never completed: journaled as started-but-unfinished by the process
    # itself or, once its lease is released, by any sweep.
    recover = subprocess.run(
        [sys.executable, "-m", "arvis", "recover"],
        env=turn.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recover.returncode == 0, recover.stderr
    assert _sql(database_url, "SELECT boundary FROM journal_entries WHERE run_id = 'turn-c'") == [
        ("EFFECT_STARTED",)
    ]


def test_at_start_it_settles_what_a_killed_instance_left_once_its_lease_expired(
    database_url: str, tmp_path: Path, tokens: dict[str, str]
) -> None:
    env = {"ARVIS_INSTANCE_ID": "killed-deployment", "ARVIS_LEASE_TTL_S": "1"}
    first = _instance(database_url, tmp_path, "turn-d1", **env).start()
    _post_in_background(
        first.url,
        tokens["acme:agent"],
        syscall_body("turn-d1", "slow", "slow.write", {"seconds": 20}),
    )
    _until(
        lambda: _sql(
            database_url,
            "SELECT count(*) FROM attempts WHERE run_id = 'turn-d1' AND started_at IS NOT NULL",
        )[0][0],
        "the slow call never started",
    )
    first.kill9()
    time.sleep(1.2)  # past the killed instance's lease

    second = _instance(database_url, tmp_path, "turn-d2", **env).start()
    try:
        # Its ready line comes after its start-up sweep.
        rows = _sql(
            database_url,
            "SELECT kind, boundary, body::jsonb->>'recovered_from' FROM journal_entries"
            " WHERE run_id = 'turn-d1'",
        )
        assert rows == [("recovery", "EFFECT_STARTED", first.ready["lease"])]
        assert second.ready["lease"] == first.ready["lease"]  # expired, so free again
    finally:
        code, _ = second.stop()
    assert code == 0, second.log()


def test_a_run_id_that_no_syscall_could_name_is_refused_at_start(
    database_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "arvis", "serve-turn", "no spaces allowed"],
        env=turn_env(database_url, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "run id" in done.stderr
    assert done.stdout == ""

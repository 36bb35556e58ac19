"""Upstream MCP servers as governed tools: a real stdio server (tests/support/upstream)
declared in arvis.toml, called through ARVIS by the official SDK's client.

Every boundary an upstream call can end in, the idempotency key it receives,
its restart after it dies, and what start-up does with a server it cannot use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp_client import Served, meta_of, notes_command, serve_arvis, text_of

pytestmark = pytest.mark.db

REPO = Path(__file__).resolve().parents[2]
CAUSAL = "arvis.dev/causal_id"


def config(state: Path, *variant: str, name: str = "notes", extra: str = "") -> str:
    return f"""
[[tools.mcp]]
name = "{name}"
command = {notes_command(state, *variant)}
timeout_s = 1.0
{extra}
[tools.mcp.overrides.add_note]
replay_safety = "idempotent"
[tools.mcp.overrides.list_notes]
effect = "read_only"

[policy.default]
consent_for_mutating_unsafe = false
"""


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes-state")


@pytest.fixture(scope="module")
def served(
    database_url: str, state: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with serve_arvis(database_url, tmp_path_factory.mktemp("arvis-up"), config(state)) as running:
        yield running


def received(state: Path, tool: str) -> list[dict[str, Any]]:
    """The ``tools/call`` requests of ``tool`` that reached the upstream server."""
    path = state / "calls.jsonl"
    calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [call for call in calls if call["tool"] == tool]


async def test_upstream_tools_are_in_the_plan_with_the_operators_metadata(served: Served) -> None:
    plan = (await served.api("GET", "/v1/tools", "acme:agent")).json()
    tools = {tool["name"]: tool for tool in plan["tools"]}
    governance = {
        name: (tool["effect"], tool["replay_safety"])
        for name, tool in tools.items()
        if name.startswith("notes.")
    }
    assert governance == {
        "notes.add_note": ("mutating", "idempotent"),
        # The server's readOnlyHint is not believed without trust_annotations;
        # the operator's override is.
        "notes.list_notes": ("read_only", "safe"),
        "notes.fail": ("mutating", "unsafe"),
        "notes.crash": ("mutating", "unsafe"),
        "notes.slow": ("mutating", "unsafe"),
        "notes.reject": ("mutating", "unsafe"),
    }
    assert tools["notes.add_note"]["input_schema"]["required"] == ["text"]
    async with served.client() as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
    assert set(governance) <= listed


async def test_a_call_reaches_the_upstream_once_with_its_idempotency_key_in_meta(
    served: Served, state: Path
) -> None:
    async with served.client() as client:
        added = await client.call_tool("notes.add_note", {"text": "buy milk"})
        again = await client.call_tool("notes.add_note", {"text": "buy milk"})
        notes = await client.call_tool("notes.list_notes", {})
    meta = meta_of(added)
    assert meta["arvis.dev/outcome"] == "executed"
    assert meta["arvis.dev/boundary"] == "EFFECT_COMPLETED"
    assert added.structured_content == {"count": 1}
    assert meta_of(again)["arvis.dev/outcome"] == "deduplicated"
    assert notes.structured_content == {"notes": ["buy milk"]}
    [call] = received(state, "add_note")
    assert call["arguments"] == {"text": "buy milk"}
    assert call["meta"]["arvis.dev/idempotency_key"] == meta["arvis.dev/idempotency_key"]
    assert call["meta"]["arvis.dev/call_id"].startswith("int_")


async def test_an_upstream_error_result_is_effect_failed_and_not_retried(served: Served) -> None:
    async with served.client() as client:
        failed = await client.call_tool("notes.fail", {})
        retried = await client.call_tool("notes.fail", {})
    assert failed.is_error is True
    assert meta_of(failed)["arvis.dev/boundary"] == "EFFECT_FAILED"
    assert "the notebook is locked" in text_of(failed)
    assert meta_of(retried)["arvis.dev/reason"] == "retry_not_advised"


async def test_a_server_that_dies_mid_call_is_unknown_and_restarts_for_the_next_call(
    served: Served,
) -> None:
    async with served.client() as client:
        crashed = await client.call_tool("notes.crash", {})
        retried = await client.call_tool("notes.crash", {})
        after = await client.call_tool("notes.list_notes", {})
    assert crashed.is_error is True
    assert meta_of(crashed)["arvis.dev/boundary"] == "EFFECT_STATE_UNKNOWN"
    assert "Do NOT retry" in text_of(crashed)
    assert meta_of(retried)["arvis.dev/reason"] == "retry_prohibited_uncertain"
    assert meta_of(after)["arvis.dev/outcome"] == "executed"
    assert (await served.api("GET", "/healthz", "acme:agent")).status_code == 200


async def test_a_call_the_server_never_received_is_not_started_and_runs_when_retried(
    served: Served, state: Path
) -> None:
    async with served.client() as client:
        await client.call_tool("notes.crash", {}, meta={CAUSAL: "crash-before-refusing"})
        (state / "refuse").write_text("the server cannot start now")
        try:
            refused = await client.call_tool("notes.add_note", {"text": "call the bank"})
        finally:
            (state / "refuse").unlink()
        retried = await client.call_tool("notes.add_note", {"text": "call the bank"})
    assert meta_of(refused)["arvis.dev/boundary"] == "EFFECT_NOT_STARTED"
    assert "Nothing ran" in text_of(refused)
    assert meta_of(retried)["arvis.dev/outcome"] == "executed"
    assert meta_of(retried)["arvis.dev/attempt"] == 2
    assert [c["arguments"]["text"] for c in received(state, "add_note")].count("call the bank") == 1


async def test_no_answer_within_the_timeout_is_unknown(served: Served) -> None:
    async with served.client() as client:
        slow = await client.call_tool("notes.slow", {"seconds": 5})
    assert meta_of(slow)["arvis.dev/boundary"] == "EFFECT_STATE_UNKNOWN"


async def test_the_upstream_calls_are_journaled_and_verify(served: Served) -> None:
    async with served.client() as client:
        run_id = meta_of(await client.call_tool("notes.list_notes", {}))["arvis.dev/run_id"]
    entries = await served.journal(run_id)
    tools = {entry["body"]["tool"] for entry in entries}
    assert {"notes.add_note", "notes.fail", "notes.crash", "notes.slow"} <= tools
    report = (await served.api("GET", f"/v1/runs/{run_id}/verify", "acme:auditor")).json()
    assert report["ok"] is True
    assert report["entries"] == len(entries)


def _arvis(tmp_path: Path, *args: str, config: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "arvis.toml"
    path.write_text(config)
    env = {
        **os.environ,
        "ARVIS_DATA_DIR": str(tmp_path / "data"),
        "ARVIS_CONFIG": str(path),
        "PYTHONPATH": str(REPO),
    }
    env.pop("ARVIS_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "arvis", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_arvis_tools_lists_upstream_tools_and_a_changed_upstream_is_a_new_plan(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    first = _arvis(tmp_path, "tools", "--json", config=config(state))
    changed = _arvis(tmp_path, "tools", "--json", config=config(state, "--variant", "reworded"))
    assert first.returncode == 0, first.stderr
    assert changed.returncode == 0, changed.stderr
    rows = {row["name"]: row for row in json.loads(first.stdout)}
    reworded = {row["name"]: row for row in json.loads(changed.stdout)}
    assert rows["notes.add_note"]["replay_safety"] == "idempotent"
    assert rows["notes.list_notes"]["fingerprint"] != reworded["notes.list_notes"]["fingerprint"]
    assert rows["notes.add_note"]["fingerprint"] == reworded["notes.add_note"]["fingerprint"]
    assert rows["echo"]["plan_id"] != reworded["echo"]["plan_id"]


def test_an_unreachable_upstream_stops_start_up_naming_it_unless_optional(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "refuse").write_text("")
    stopped = _arvis(tmp_path, "serve", "--port", "0", config=config(state))
    optional = _arvis(tmp_path, "tools", "--json", config=config(state, extra="optional = true"))
    assert stopped.returncode == 1
    lines = stopped.stderr.strip().splitlines()
    assert len(lines) == 1, stopped.stderr
    assert "[[tools.mcp]] 'notes'" in lines[0]
    assert not (tmp_path / "data" / "pgdata").exists()
    assert optional.returncode == 0, optional.stderr
    assert not any(row["name"].startswith("notes.") for row in json.loads(optional.stdout))
    assert "'notes' is optional and unreachable; its tools are left out" in optional.stderr


async def test_a_streamable_http_upstream_is_reached_with_its_header_behind_the_egress_gate(
    served: Served,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The upstream here is an ARVIS: its /mcp is a streamable HTTP MCP server.
    monkeypatch.setenv("UPSTREAM_TOKEN", f"Bearer {served.tokens['acme:agent']}")
    fronting = f"""
[[tools.mcp]]
name = "inner"
url = "{served.mcp_url}"
headers_env = {{ Authorization = "UPSTREAM_TOKEN" }}
trust_annotations = true

[policy.default]
egress_hosts = ["127.0.0.1"]

[policy.tenants.globex]
egress_hosts = []
"""
    with serve_arvis(database_url, tmp_path, fronting) as outer:
        plan = (await outer.api("GET", "/v1/tools", "acme:agent")).json()
        echo = next(tool for tool in plan["tools"] if tool["name"] == "inner.echo")
        async with outer.client() as client:
            ran = await client.call_tool("inner.echo", {"through": "two ARVIS"})
        async with outer.client("globex:agent") as client:
            fenced = await client.call_tool("inner.echo", {"through": "nowhere"})
    assert meta_of(fenced)["arvis.dev/reason"] == "egress_denied"
    assert (echo["effect"], echo["replay_safety"]) == ("read_only", "safe")
    assert meta_of(ran)["arvis.dev/outcome"] == "executed", text_of(ran)
    assert ran.structured_content == {"through": "two ARVIS"}

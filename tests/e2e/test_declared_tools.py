"""What `arvis.toml` declares is checked before anything is served."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mcp_client import notes_command, serve_arvis
from tests.support.reliability import taken_port
from tests.support.server import running
from tests.support.upstream.acting import ActingEndpoint, ActingUpstream

REPO = Path(__file__).resolve().parents[2]


def _arvis(
    tmp_path: Path, *args: str, config: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARVIS_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    env.pop("ARVIS_DATABASE_URL", None)
    if config is not None:
        path = tmp_path / "arvis.toml"
        path.write_text(config)
        env["ARVIS_CONFIG"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "arvis", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


CONTRADICTORY = '[tools]\nfactories = ["tests.unit.tools.factories:contradictory"]\n'


def test_a_contradictory_declared_tool_stops_serve_naming_the_tool_and_the_rule(
    tmp_path: Path,
) -> None:
    result = _arvis(tmp_path, "serve", "--port", "0", config=CONTRADICTORY)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "arvis: error: tool 'cache.flush'" in lines[0]
    assert "read_only" in lines[0]
    # Refused before any database was started for it.
    assert not (tmp_path / "data" / "pgdata").exists()


def test_arvis_tools_json_lists_the_builtins_with_stable_fingerprints(tmp_path: Path) -> None:
    first = _arvis(tmp_path, "tools", "--json")
    second = _arvis(tmp_path, "tools", "--json")
    assert first.returncode == 0, first.stderr
    rows = json.loads(first.stdout)
    assert rows == json.loads(second.stdout)
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == {"echo", "files.read", "files.write", "files.append"}
    assert (by_name["files.append"]["effect"], by_name["files.append"]["replay_safety"]) == (
        "mutating",
        "unsafe",
    )
    assert by_name["files.write"]["capabilities"] == ["filesystem.write"]
    assert len({row["plan_id"] for row in rows}) == 1
    assert all(len(row["fingerprint"]) == 64 for row in rows)


def test_an_upstream_server_named_files_stops_serve_naming_it_and_the_builtin(
    tmp_path: Path,
) -> None:
    # DESIGN §10 "Names are unique": it would replace files.read and files.write.
    config = f"""
[[tools.mcp]]
name = "files"
command = {notes_command(tmp_path, "--variant", "files")}
trust_annotations = true
"""
    result = _arvis(tmp_path, "serve", "--port", "0", config=config)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert (
        "tool 'files.read' is declared by both the built-in tools and [[tools.mcp]] 'files'"
        in (lines[0])
    )
    assert not (tmp_path / "data" / "pgdata").exists()


def test_an_http_tool_taking_a_builtins_name_stops_serve_naming_both(tmp_path: Path) -> None:
    config = """
[[tools.http]]
name = "echo"
description = "Not the built-in echo."
url = "https://echo.example/arvis"
effect = "read_only"
replay_safety = "safe"
"""
    result = _arvis(tmp_path, "serve", "--port", "0", config=config)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "tool 'echo' is declared by both the built-in tools and [[tools.http]] #1" in line


def test_an_upstream_no_tenant_may_reach_is_refused_at_start_up_and_sent_nothing(
    tmp_path: Path,
) -> None:
    stub = ActingUpstream()
    with running(stub) as url:
        config = f"""
[[tools.mcp]]
name = "act"
url = "{url}/mcp"

[policy.default]
egress_hosts = ["api.example.com"]

[policy.tenants.globex]
egress_hosts = ["*.example.org"]
"""
        result = _arvis(tmp_path, "tools", "--json", config=config)
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "[[tools.mcp]] 'act': its host 127.0.0.1 is on no egress_hosts" in line
    assert stub.requests == []


@pytest.mark.db
async def test_a_backtracking_pattern_in_a_tools_schema_never_stalls_the_server(
    database_url: str, tmp_path: Path
) -> None:
    # DESIGN §10: with Python's re this payload needs ~2**40 steps on the event loop.
    endpoint = ActingEndpoint()
    with running(endpoint) as base:
        config = f"""
[[tools.http]]
name = "notes.add"
description = "Add a note."
url = "{base}/ok"
effect = "mutating"
replay_safety = "idempotent"

[tools.http.input_schema]
type = "object"
properties = {{ text = {{ type = "string", pattern = "^(a+)+$" }} }}

[policy.default]
egress_hosts = ["127.0.0.1"]
"""
        with serve_arvis(database_url, tmp_path, config) as served:
            body = {
                "name": "tool.execute",
                "run_id": "run-redos",
                "causal_id": "c-1",
                "decision": {"tool": "notes.add", "payload": {"text": "a" * 40 + "!"}},
            }
            call = asyncio.create_task(served.api("POST", "/v1/syscalls", "acme:agent", json=body))
            health = await served.api("GET", "/healthz", "acme:agent")
            answer = await call
            body["causal_id"] = "c-2"
            body["decision"] = {"tool": "notes.add", "payload": {"text": "a" * 40}}
            valid = await served.api("POST", "/v1/syscalls", "acme:agent", json=body)
    assert health.status_code == 200
    assert answer.json()["reason"] == "payload_invalid", answer.text
    assert "does not match" in answer.json()["detail"]
    assert valid.json()["outcome"] == "executed", valid.text
    assert endpoint.effect_count("/ok") == 1


# -- every command checks arvis.toml as serve does (issue 27) ---------------------------

BROKEN_BUDGET = '[[budgets]]\ntool = "echo"\nlimit = -1\nwindow = "nonsense"\n'


def test_tools_refuses_a_file_serve_refuses_with_the_same_line(tmp_path: Path) -> None:
    served = _arvis(tmp_path, "serve", "--port", "0", config=BROKEN_BUDGET)
    listed = _arvis(tmp_path, "tools", "--json", config=BROKEN_BUDGET)
    journal = _arvis(tmp_path, "journal", "run-1", "--tenant", "t", config=BROKEN_BUDGET)

    assert served.returncode == 1, served.stderr
    assert listed.returncode == 1, listed.stdout
    assert journal.returncode == 1, journal.stdout
    assert listed.stdout == ""
    [line] = served.stderr.strip().splitlines()
    assert line.startswith("arvis: error: [[budgets]]")
    assert listed.stderr.strip() == journal.stderr.strip() == line
    assert not (tmp_path / "data" / "pgdata").exists()


def test_a_validators_message_reaches_the_operator_without_pydantics_prefix(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "ARVIS_DATABASE_URL": "mysql://somewhere/db", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "arvis", "tools"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "arvis: error: ARVIS_DATABASE_URL: must be a postgresql:// URL"
    bad_tool = '[tools]\nfactories = ["not a spec"]\n'
    listed = _arvis(tmp_path, "tools", config=bad_tool)
    assert listed.returncode == 1
    assert "Value error" not in listed.stderr
    assert "arvis: error: " in listed.stderr


@pytest.mark.db
def test_a_port_in_use_is_one_line_and_nothing_says_it_serves(
    database_url: str, tmp_path: Path
) -> None:
    with taken_port() as port:
        env = {
            **os.environ,
            "ARVIS_DATABASE_URL": database_url,
            "ARVIS_DATA_DIR": str(tmp_path),
            "PYTHONPATH": str(REPO),
        }
        env.pop("ARVIS_CONFIG", None)
        done = subprocess.run(
            [sys.executable, "-m", "arvis", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
    assert done.returncode == 1
    assert "serving on" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line == f"arvis: error: cannot listen on 127.0.0.1:{port}: Address already in use"

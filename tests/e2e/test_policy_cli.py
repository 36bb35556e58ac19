"""``arvis policy schema | validate | check`` and ``arvis serve`` refusing an invalid policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arvis.cli import app
from tests.support.cedar import write_policies

CONFIG = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"

[policy.default]
egress_hosts = ["api.example.com"]

[[budgets]]
name = "writes"
tools = ["files.write"]
limit = 3
per = "1d"
scope = ["principal"]
"""
POLICIES = {
    "base.cedar": '@id("acme")\npermit (principal in Arvis::Tenant::"acme", action, resource);\n',
    "guards.cedar": (
        "// Secrets are written only with an approver's consent.\n"
        '@id("secret-writes")\n@consent("required")\n'
        'permit (principal, action, resource == Arvis::Tool::"files.write")\n'
        'when { context.payload has path && context.payload.path like "secret/*" };\n\n'
        '@id("no-appends")\nforbid (principal, action, resource == Arvis::Tool::"files.append");\n'
    ),
}


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    write_policies(tmp_path, POLICIES)
    return tmp_path


def runner(directory: Path) -> CliRunner:
    return CliRunner(
        env={"ARVIS_DATA_DIR": str(directory), "ARVIS_CONFIG": str(directory / "arvis.toml")}
    )


def test_schema_prints_the_shipped_schema_with_the_plans_payload(deployment: Path) -> None:
    result = runner(deployment).invoke(app, ["policy", "schema"])
    assert result.exit_code == 0, result.output
    assert "entity Principal in [Tenant]" in result.output
    assert 'action "tool.execute" appliesTo' in result.output
    assert '"content"?: String,' in result.output  # files.write's field


def test_validate_prints_the_policies_and_the_fingerprint(deployment: Path) -> None:
    result = runner(deployment).invoke(app, ["policy", "validate", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["files"] == ["policies/base.cedar", "policies/guards.cedar"]
    assert summary["policies"] == ["acme", "secret-writes", "no-appends"]
    assert len(summary["fingerprint"]) == 64
    assert summary["budgets"] == ["writes"]


def test_validate_names_the_file_and_line_of_a_broken_policy(deployment: Path) -> None:
    write_policies(deployment, {"late.cedar": "\n\npermit (principal, action, resource)\n"})
    result = runner(deployment).invoke(app, ["policy", "validate"])
    assert result.exit_code == 1
    assert "policies/late.cedar:3: unexpected end of input" in result.output


CONSENT = "allow with consent"


@pytest.mark.parametrize(
    ("tool", "payload", "decision", "policies"),
    [
        ("files.write", {"path": "notes/a", "content": "x"}, "allow", "acme"),
        ("files.write", {"path": "secret/a", "content": "x"}, CONSENT, "acme, secret-writes"),
        # Decided on the path the tool opens, as admission decides (DESIGN §10).
        ("files.write", {"path": "./secret//./a", "content": "x"}, CONSENT, "acme, secret-writes"),
        ("files.append", {"path": "a", "line": "x"}, "deny", "no-appends"),
    ],
)  # fmt: skip
def test_check_prints_the_decision_and_the_deciding_policies(
    deployment: Path, tool: str, payload: dict[str, str], decision: str, policies: str
) -> None:
    result = runner(deployment).invoke(
        app,
        ["policy", "check", "--principal", "bot", "--tenant", "acme", "--tool", tool,
         "--payload", json.dumps(payload)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"decision: {decision}\n" in result.output
    assert f"policies: {policies}\n" in result.output
    assert "engine: cedar" in result.output


def test_check_refuses_a_path_the_tool_could_not_act_on_as_admission_would(
    deployment: Path,
) -> None:
    result = runner(deployment).invoke(
        app,
        ["policy", "check", "--principal", "bot", "--tenant", "acme", "--tool", "files.write",
         "--payload", '{"path": "../a", "content": "x"}', "--json"],
    )  # fmt: skip
    answer = json.loads(result.output)
    assert (answer["decision"], answer["reason"]) == ("deny", "payload_invalid")
    assert "(path_outside_sandbox)" in answer["detail"]


def test_check_shows_the_budgets_a_call_would_be_charged(deployment: Path) -> None:
    result = runner(deployment).invoke(
        app,
        ["policy", "check", "--principal", "bot", "--tenant", "acme", "--tool", "files.write",
         "--payload", '{"path": "a", "content": "x"}', "--json"],
    )  # fmt: skip
    answer = json.loads(result.output)
    assert answer["budgets"][0].startswith("writes: 1 of 3 until ")
    other = runner(deployment).invoke(
        app,
        ["policy", "check", "--principal", "bot", "--tenant", "globex", "--tool", "echo",
         "--json"],
    )  # fmt: skip
    assert json.loads(other.output)["decision"] == "deny"  # no policy permits globex


def test_serve_refuses_to_start_on_an_invalid_policy_naming_file_and_line(
    deployment: Path,
) -> None:
    write_policies(
        deployment,
        {"typo.cedar": 'forbid (principal, action, resource)\n  when { principal.tenat == "x" };'},
    )
    env = {
        **os.environ,
        "ARVIS_DATA_DIR": str(deployment),
        "ARVIS_CONFIG": str(deployment / "arvis.toml"),
        "ARVIS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/never",
    }
    done = subprocess.run(
        [sys.executable, "-m", "arvis", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "policies/typo.cedar:1: " in done.stderr
    assert "tenat" in done.stderr

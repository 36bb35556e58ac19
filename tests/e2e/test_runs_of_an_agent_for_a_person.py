"""Who made the calls of a run, over HTTP and the CLI (issues 26, 27), against a real OpenID
provider: a run an agent made for a person is listed with the person as its principal and
the agent as its actor, found by either, and its journal says "agent for person".

Two agents act for alice: the provider's ``arvis-agent`` through a token exchanged with an
actor token (RFC 8693 ``act``), and ``agent-of-acme``'s API key presenting her token as
``Arvis-Subject-Token`` (its call refused: a refusal names the agent too). The same key's
own run has ``agent-of-acme`` as its principal and no actor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from arvis.cli import app
from arvis.client import ArvisClient
from tests.support.identity import trust
from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.db

SUBJECT = "Arvis-Subject-Token"
EXCHANGED, PRESENTED, OWN = "ra-exchanged", "ra-presented", "ra-own"


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    data_dir: Path = tmp_path_factory.mktemp("arvis-runs-acting")
    with serve_arvis(database_url, data_dir, trust(oidc_provider.issuer)) as running:
        yield running


def _syscall(run_id: str, tool: str) -> dict[str, Any]:
    body = {"tool": tool, "payload": {"n": 1}}
    return {"name": "tool.execute", "run_id": run_id, "causal_id": "c-1", "decision": body}


@pytest.fixture(scope="module")
def runs(served: Served, oidc_provider: OidcProvider) -> dict[str, dict[str, Any]]:
    """The three runs, each as one syscall's answer."""
    alice = oidc_provider.user_token("alice")
    exchanged = oidc_provider.token_exchange(
        alice, audience="arvis", actor_token=oidc_provider.agent_token()
    ).access_token
    calls = {
        EXCHANGED: ({"Authorization": f"Bearer {exchanged}"}, "echo"),
        PRESENTED: ({**served.auth("acme:agent"), SUBJECT: alice}, "no.such.tool"),
        OWN: (served.auth("acme:agent"), "echo"),
    }
    answers = {}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for run_id, (headers, tool) in calls.items():
            answer = http.post("/v1/syscalls", json=_syscall(run_id, tool), headers=headers)
            assert answer.status_code == 200, answer.text
            answers[run_id] = answer.json()
    assert answers[PRESENTED]["outcome"] == "refused"
    return answers


def _listed(served: Served, **params: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=served.url, timeout=30) as http:
        answer = http.get("/v1/runs", params=params, headers=served.auth("acme:auditor"))
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()["runs"]
    return listed


def _who(listed: list[dict[str, Any]]) -> dict[str, tuple[str, list[str]]]:
    return {r["run_id"]: (r["principal"], r["actors"]) for r in listed}


def _cli(env: dict[str, str], *args: str) -> str:
    result = CliRunner(env=env).invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.fixture
def local(served: Served, database_url: str, tmp_path: Path) -> dict[str, str]:
    """``arvis`` on the served database (local mode)."""
    config = tmp_path / "arvis.toml"
    config.write_text((served.data_dir / "arvis.toml").read_text())
    return {
        "ARVIS_DATABASE_URL": database_url,
        "ARVIS_DATA_DIR": str(tmp_path),
        "ARVIS_CONFIG": str(config),
        "ARVIS_URL": "",
        "ARVIS_API_KEY": "",
        "ARVIS_TENANT": "acme",
    }


def _remote(served: Served) -> dict[str, str]:
    # No database in sight: remote mode must not need one.
    return {
        "ARVIS_URL": served.url,
        "ARVIS_API_KEY": served.tokens["acme:auditor"],
        "ARVIS_DATABASE_URL": "postgresql://nowhere.invalid/x",
        "ARVIS_TENANT": "",
    }


def test_a_run_an_agent_made_for_a_person_lists_the_person_and_the_agent(
    served: Served, runs: dict[str, dict[str, Any]]
) -> None:
    assert _who(_listed(served, q="ra-")) == {
        EXCHANGED: ("alice", ["arvis-agent"]),
        PRESENTED: ("alice", ["agent-of-acme"]),
        OWN: ("agent-of-acme", []),
    }


def test_the_list_filters_by_the_actor_exactly_and_by_the_principal(
    served: Served, runs: dict[str, dict[str, Any]]
) -> None:
    assert [r["run_id"] for r in _listed(served, actor="arvis-agent")] == [EXCHANGED]
    # The agent's own run has it as its principal, not as an actor.
    assert [r["run_id"] for r in _listed(served, actor="agent-of-acme")] == [PRESENTED]
    assert _listed(served, actor="agent") == []
    assert {r["run_id"] for r in _listed(served, principal="alice", q="ra-")} == {
        EXCHANGED,
        PRESENTED,
    }
    both = _listed(served, principal="alice", actor="agent-of-acme", status="refused")
    assert [r["run_id"] for r in both] == [PRESENTED]


def test_arvis_runs_lists_and_filters_the_same_locally_and_remotely(
    served: Served, runs: dict[str, dict[str, Any]], local: dict[str, str]
) -> None:
    args = ("runs", "--actor", "agent-of-acme", "--json")
    here = json.loads(_cli(local, *args))
    there = json.loads(_cli(_remote(served), *args))
    assert here == there
    assert [(r["run_id"], r["principal"], r["actors"]) for r in there["runs"]] == [
        (PRESENTED, "alice", ["agent-of-acme"])
    ]
    for env in (local, _remote(served)):
        table = _cli(env, "runs", "--q", "ra-")
        row = next(line for line in table.splitlines() if EXCHANGED in line)
        assert "agent arvis-agent for alice" in row
        assert "WHO" in table.splitlines()[0]


def test_remote_arvis_runs_takes_every_filter_and_pages(
    served: Served, runs: dict[str, dict[str, Any]]
) -> None:
    remote = _remote(served)
    day = datetime.now(UTC) - timedelta(days=1)
    found = json.loads(
        _cli(
            remote,
            *("runs", "--json", "--q", "ra-", "--principal", "alice", "--tool", "echo"),
            *("--status", "running", "--started-after", day.isoformat()),
            *("--active-after", day.isoformat(), "--active-before", "2999-01-01T00:00:00"),
            *("--started-before", "2999-01-01T00:00:00+00:00"),
        )
    )
    assert [r["run_id"] for r in found["runs"]] == [EXCHANGED]
    first = json.loads(_cli(remote, "runs", "--json", "--q", "ra-", "--limit", "1"))
    assert first["next_cursor"] is not None
    second = json.loads(
        _cli(
            remote, "runs", "--json", "--q", "ra-", "--limit", "1", "--cursor", first["next_cursor"]
        )
    )
    assert first["runs"][0]["run_id"] != second["runs"][0]["run_id"]
    refused = CliRunner(env=remote).invoke(app, ["runs", "--status", "finished"])
    assert refused.exit_code == 2
    agent = CliRunner(env={**remote, "ARVIS_API_KEY": served.tokens["acme:agent"]}).invoke(
        app, ["runs"]
    )
    assert agent.exit_code == 1
    assert "403 forbidden_role" in agent.output


def test_the_python_client_lists_by_actor(served: Served, runs: dict[str, dict[str, Any]]) -> None:
    with ArvisClient(served.url, served.tokens["acme:auditor"]) as client:
        page = client.runs(
            actor="arvis-agent", started_after=datetime.now(UTC) - timedelta(hours=1)
        )
    assert [(r.run_id, r.principal, r.actors) for r in page.runs] == [
        (EXCHANGED, "alice", ["arvis-agent"])
    ]


def test_arvis_journal_says_which_agent_acted_for_whom(
    served: Served, runs: dict[str, dict[str, Any]], local: dict[str, str]
) -> None:
    key_id = served.tokens["acme:agent"].split("_")[1]
    for env in (local, _remote(served)):
        table = _cli(env, "journal", PRESENTED)
        assert "BY" in table.splitlines()[0]
        assert f"agent agent-of-acme (key {key_id}) for alice" in table
        assert "agent arvis-agent for alice" in _cli(env, "journal", EXCHANGED)
        assert "for" not in _cli(env, "journal", OWN).splitlines()[1]

"""DESIGN §10 "One edge": every check that is not translation lives in the handler, once,
so an entry point never admits what another would refuse.

- A per-turn instance serves one run, on every entry point it offers (``/v1/syscalls`` and
  ``/mcp`` alike): another run's decision is refused ``run_not_served`` and nothing is
  recorded, not even the run.
- What the policy and the schema refuse is refused with the same code at every entry point
  that posts decisions, and nothing runs.
- What a syscall leaves behind is the same whichever way it came: the process's metrics
  count it (its outcome and boundary, each phase; or its error's code), and its
  request's access-log line carries its run, causal id, key id and outcome (or problem
  code) — the handler's, not the entry point's.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, offering

pytestmark = pytest.mark.db


@pytest.mark.parametrize("entry", offering("post", per_turn=True))
async def test_a_per_turn_instance_refuses_another_runs_decision_and_records_nothing(
    deployment: Deployment, entry: EntryPoint
) -> None:
    driver = entry.driver(deployment)
    other = f"not-this-turns-{entry.slug}"
    path = f"scope-{entry.slug}.txt"
    answer = await driver.post(
        "acme:agent", other, "c1", "files.append", {"path": path, "line": "out of scope"}
    )
    assert answer.outcome in ("refused", "error"), answer.raw
    assert answer.code == "run_not_served", answer.raw
    assert not (deployment.data_dir / "sandbox" / path).exists()
    assert deployment.sql("SELECT count(*) FROM runs WHERE run_id = %s", other) == [(0,)]


REFUSED: list[Any] = [
    pytest.param(
        "files.append", {"path": "denied.txt", "line": "x"}, "policy_denied", id="deny_tools"
    ),
    pytest.param("web.ok", {"token": "token:edge:egress"}, "egress_denied", id="egress"),
    pytest.param("files.write", {"path": "w.txt", "content": 7}, "payload_invalid", id="schema"),
]


@pytest.mark.parametrize(("tool", "payload", "code"), REFUSED)
@pytest.mark.parametrize("entry", offering("post"))
async def test_every_entry_point_refuses_what_the_edge_refuses(
    deployment: Deployment, entry: EntryPoint, tool: str, payload: dict[str, Any], code: str
) -> None:
    driver = entry.driver(deployment)
    run = driver.run("edge")
    answer = await driver.post("initech:agent", run, f"edge.{code}.{entry.slug}", tool, payload)
    assert (answer.outcome, answer.code) == ("refused", code), answer.raw
    assert not (deployment.data_dir / "sandbox" / "denied.txt").exists()
    assert deployment.stubs.http_effects.count("token:edge:egress") == 0


def _count(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text ``metrics`` (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    found = re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


def _line_of(lines: list[dict[str, Any]], causal_id: str) -> dict[str, Any]:
    [line] = [line for line in lines if line.get("causal_id") == causal_id]
    return line


def _key_id(deployment: Deployment, who: str) -> str:
    """The key id the access log names (none for a JWT principal: its issuer instead)."""
    token = deployment.tokens[who]
    return token.split("_")[1] if token.startswith("arvis_") else ""


@pytest.mark.parametrize("entry", offering("post"))
async def test_every_entry_point_counts_and_logs_an_answered_syscall_alike(
    deployment: Deployment, entry: EntryPoint
) -> None:
    driver = entry.driver(deployment)
    run, causal = driver.run("counted"), f"counted-{uuid.uuid4().hex[:8]}"
    executed = {"outcome": "executed", "boundary": "EFFECT_COMPLETED"}
    phases = ("admission", "dispatch", "journal", "total")
    before = await driver.metrics()
    answer = await driver.post("acme:agent", run, causal, "echo", {"note": causal})
    assert answer.outcome == "executed", answer.raw
    after = await driver.metrics()
    counted = _count(after, "arvis_syscalls_total", **executed) - _count(
        before, "arvis_syscalls_total", **executed
    )
    assert counted == 1
    for phase in phases:
        name = "arvis_syscall_phase_seconds_count"
        assert _count(after, name, phase=phase) - _count(before, name, phase=phase) == 1, phase
    line = _line_of(driver.access_log(), causal)
    assert line["run_id"] == run
    assert line["key"] == _key_id(deployment, "acme:agent")
    assert line["outcome"] == "executed"
    assert "problem" not in line


@pytest.mark.parametrize("entry", offering("post"))
async def test_every_entry_point_counts_and_logs_a_syscall_error_alike(
    deployment: Deployment, entry: EntryPoint
) -> None:
    # Another principal's derived run: the handler refuses it with an error (nothing is
    # answered), or, on a per-turn instance, any run but its own.
    driver = entry.driver(deployment)
    code = "run_not_served" if entry.per_turn else "identity_mismatch"
    causal = f"erring-{uuid.uuid4().hex[:8]}"
    before = await driver.metrics()
    answer = await driver.post("acme:agent", "mcp:someone-else", causal, "echo", {"n": 1})
    assert (answer.outcome, answer.code) == ("error", code), answer.raw
    after = await driver.metrics()
    name = "arvis_syscall_errors_total"
    assert _count(after, name, code=code) - _count(before, name, code=code) == 1
    line = _line_of(driver.access_log(), causal)
    assert line["run_id"] == "mcp:someone-else"
    assert line["key"] == _key_id(deployment, "acme:agent")
    assert line["problem"] == code
    assert "outcome" not in line

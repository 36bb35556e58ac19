"""DESIGN §10 "One edge": every check that is not translation lives in the handler, once,
so an entry point never admits what another would refuse.

- A per-turn instance serves one run, on every entry point it offers (``/v1/syscalls`` and
  ``/mcp`` alike): another run's decision is refused ``run_not_served`` and nothing is
  recorded, not even the run.
- What the policy and the schema refuse is refused with the same code at every entry point
  that posts decisions, and nothing runs.
"""

from __future__ import annotations

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

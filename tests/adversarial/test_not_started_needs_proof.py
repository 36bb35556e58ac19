"""DESIGN §10 "Not-started needs proof", for every tool kind, hostile answer and entry point.

Each stub performs its effect and only then answers its hostile way. Whatever it answers,
the far side answered: the call is never ``EFFECT_NOT_STARTED``, and posting the same
decision again never runs the tool body again (the tools are ``unsafe``; tenant ``acme``
asks no consent). The positive controls are the cases ARVIS can prove: nothing listening
(connection refused), a stdio server that cannot be started.
"""

from __future__ import annotations

import pytest

from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, offering
from tests.support.adversarial.toolkinds import TOOL_KINDS, ToolKind, control_tool

pytestmark = pytest.mark.db

AGENT = "acme:agent"
HOSTILE = [
    pytest.param(kind, mode, id=f"{kind.name}-{mode}")
    for kind in TOOL_KINDS
    for mode in kind.hostile
]
CONTROLS = [
    pytest.param(kind, mode, id=f"{kind.name}-{mode}")
    for kind in TOOL_KINDS
    for mode in kind.controls
]


def _ids(entry: EntryPoint, kind: ToolKind, mode: str) -> tuple[str, str]:
    """A cell's causal id and token: unique, and legal ids (``[A-Za-z0-9._:-]``)."""
    cell = f"{entry.slug}.{kind.name}.{mode}"
    return f"ns.{cell}", f"token:{cell}"


@pytest.mark.parametrize(("kind", "mode"), HOSTILE)
@pytest.mark.parametrize("entry", offering("post"))
async def test_an_answer_from_the_far_side_is_never_not_started_and_never_runs_twice(
    deployment: Deployment, entry: EntryPoint, kind: ToolKind, mode: str
) -> None:
    driver = entry.driver(deployment)
    run, (causal, token) = driver.run("not-started"), _ids(entry, kind, mode)

    first = await driver.post(AGENT, run, causal, kind.tool(mode), kind.payload(token))
    assert deployment.effects(kind, token) == 1, f"the stub did not act: {first.raw}"
    assert first.outcome == "executed", first.raw
    assert first.boundary != "EFFECT_NOT_STARTED", first.raw

    again = [
        await driver.post(AGENT, run, causal, kind.tool(mode), kind.payload(token))
        for _ in range(2)
    ]
    assert deployment.effects(kind, token) == 1, [answer.raw for answer in again]


@pytest.mark.parametrize(("kind", "mode"), CONTROLS)
@pytest.mark.parametrize("entry", offering("post"))
async def test_a_call_that_provably_never_reached_the_tool_is_not_started_and_retried(
    deployment: Deployment, entry: EntryPoint, kind: ToolKind, mode: str
) -> None:
    driver = entry.driver(deployment)
    assert kind.arrange is not None
    run, (causal, token) = driver.run("not-started"), _ids(entry, kind, mode)
    tool = control_tool(kind, mode)

    async def post_other(other: str, payload: dict[str, object]) -> object:
        return await driver.post(AGENT, run, f"{causal}.arrange", other, payload)

    async with kind.arrange(mode, deployment.stubs, post_other):
        first = await driver.post(AGENT, run, causal, tool, kind.payload(token))
    assert first.boundary == "EFFECT_NOT_STARTED", first.raw
    assert deployment.effects(kind, token) == 0

    retried = await driver.post(AGENT, run, causal, tool, kind.payload(token))
    assert (retried.outcome, retried.attempt) == ("executed", 2), retried.raw

"""DESIGN §10 "Nothing on the event loop runs unbounded", for every tool kind that can carry
an input schema of its own, at every entry point of a per-turn instance.

Each kind declares a tool whose input schema has the pattern ``^(a+)+$``; the payload
``"a" * 40 + "!"`` takes a backtracking engine 2**40 steps to refuse. While that decision
is being checked, ``/healthz`` of the same process must still answer, and the decision must
get its refusal. The instance runs in a process of its own: a stalled one is killed, and the
next cell gets a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, offering
from tests.support.adversarial.modes import BACKTRACKING_TEXT
from tests.support.adversarial.toolkinds import TOOL_KINDS, ToolKind

pytestmark = pytest.mark.db

RUN = "turn-unbounded"
HEALTH_TIMEOUT_S = 5.0
"""Far more than a healthy instance needs; far less than 2**40 backtracking steps."""
KINDS = [pytest.param(kind, id=kind.name) for kind in TOOL_KINDS if kind.backtracking_tool]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", offering("post", per_turn=True))
async def test_a_hostile_schema_never_stalls_the_instance(
    deployment: Deployment, entry: EntryPoint, kind: ToolKind
) -> None:
    assert kind.backtracking_tool is not None
    driver = entry.driver(deployment, RUN)
    url = deployment.turn(RUN).url
    causal = f"unbounded.{entry.slug}.{kind.name}"
    decision = asyncio.create_task(
        driver.post("acme:agent", RUN, causal, kind.backtracking_tool, {"text": BACKTRACKING_TEXT})
    )
    try:
        await asyncio.wait({decision}, timeout=0.5)
        async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as http:
            try:
                health = (await http.get(f"{url}/healthz")).status_code
            except httpx.TimeoutException:
                health = None
        assert health == 200, "/healthz stalled while a payload was checked against the schema"
        answer = await asyncio.wait_for(decision, 30)
    except BaseException:
        deployment.drop_turn(RUN)  # stalled: killed, and the next cell starts a fresh one
        decision.cancel()
        with contextlib.suppress(BaseException):
            await decision
        raise
    assert answer.outcome == "refused", answer.raw

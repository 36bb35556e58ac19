"""DESIGN §10 "A stable instance id settles its own crash at start-up", for every kind of
admitting process: killed mid-call and started again under the same ``ARVIS_INSTANCE_ID``,
it settles its predecessor's call at once (the re-post is answered, not ``409
attempt_in_flight`` until the lease expires, and the tool does not run again) — and it
never sweeps the call of a live sibling sharing that id (per-turn instances all do).

The call is ``app.hold``: it reports its start, acts, and holds until the test opens its
gate. The lease outlives the test, so only settling at start-up can settle it.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.adversarial.answers import Answer
from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import HttpDriver
from tests.support.adversarial.instances import INSTANCES, InstanceKind
from tests.support.adversarial.toolkinds import APP
from tests.support.evidence import wait_for

pytestmark = pytest.mark.db

AGENT = "acme:agent"
KINDS = [pytest.param(kind, id=kind.name) for kind in INSTANCES]


class _At(HttpDriver):
    def __init__(self, deployment: Deployment, url: str) -> None:
        super().__init__(deployment)
        self._url = url

    def base(self) -> str:
        return self._url


def _effects(deployment: Deployment, token: str) -> int:
    return deployment.effects(APP, token)


async def _hold(deployment: Deployment, url: str, run: str, gate: str) -> asyncio.Task[Answer]:
    """Post ``app.hold`` in the background; answer once it has acted (and holds)."""
    payload = {"token": f"token:{gate}", "gate": gate}
    task = asyncio.create_task(_At(deployment, url).post(AGENT, run, gate, "app.hold", payload))
    await wait_for(lambda: _effects(deployment, f"token:{gate}") == 1 or task.done(), 30)
    assert not task.done(), task.result().raw
    return task


@pytest.mark.parametrize("kind", KINDS)
async def test_a_restart_under_the_same_instance_id_settles_its_crashed_predecessor(
    deployment: Deployment, kind: InstanceKind
) -> None:
    instance_id, run, gate = f"stable-{kind.name}", f"crash-{kind.name}", f"crash-{kind.name}"
    first = kind.start(deployment, run, instance_id, f"{gate}-1")
    try:
        held = await _hold(deployment, first.url, run, gate)
    finally:
        first.kill9()
    held.cancel()
    second = kind.start(deployment, run, instance_id, f"{gate}-2")
    try:
        payload = {"token": f"token:{gate}", "gate": gate}
        again = await _At(deployment, second.url).post(AGENT, run, gate, "app.hold", payload)
    finally:
        second.stop()
    assert again.code != "attempt_in_flight", again.raw
    assert again.outcome == "refused", again.raw
    assert _effects(deployment, f"token:{gate}") == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_start_under_the_same_instance_id_never_sweeps_a_live_siblings_call(
    deployment: Deployment, kind: InstanceKind
) -> None:
    instance_id, gate = f"shared-{kind.name}", f"sibling-{kind.name}"
    run, other_run = f"sibling-{kind.name}", f"sibling-{kind.name}-other"
    first = kind.start(deployment, run, instance_id, f"{gate}-1")
    try:
        held = await _hold(deployment, first.url, run, gate)
        second = kind.start(deployment, other_run, instance_id, f"{gate}-2")
        try:
            (deployment.data_dir / "gates").mkdir(exist_ok=True)
            (deployment.data_dir / "gates" / gate).touch()
            answer = await asyncio.wait_for(held, 60)
        finally:
            second.stop()
    finally:
        first.stop()
    assert (answer.outcome, answer.boundary) == ("executed", "EFFECT_COMPLETED"), answer.raw
    recovered = "SELECT count(*) FROM journal_entries WHERE run_id = %s AND kind = 'recovery'"
    assert deployment.sql(recovered, run) == [(0,)]

"""Scenario 3: PostgreSQL stops mid-load and starts again; ``arvis serve`` is not restarted.

During the outage every answer is 503 ``store_unavailable`` within the request
deadline and ``/readyz`` fails; afterwards the same process serves again, every
action gets its governed answer, nothing is lost and no effect runs twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.store.migrate import upgrade
from tests.support.http import mint_keys
from tests.support.pgcluster import PrivateCluster, binaries_like, start_private_cluster
from tests.support.postgres import create_database
from tests.support.postgres import sql as _sql
from tests.support.reliability import PatientAgent, Served, Tally, report, size, syscall_body

pytestmark = [pytest.mark.db, pytest.mark.reliability]

ACTIONS = size(ci=150, full=1000)
OUTAGE_S = size(ci=3, full=8)
CLIENTS = 8
# Above the store's own connection wait (5 s), below the 30 s default.
DEADLINE_S = 8.0


@pytest.fixture(scope="module")
def cluster(pg_server_url: str) -> Iterator[PrivateCluster]:
    started = start_private_cluster(binaries_like(pg_server_url))
    try:
        yield started
    finally:
        started.destroy()


def _actions() -> list[dict[str, Any]]:
    rng = random.Random(3)
    bodies = []
    for n in range(ACTIONS):
        run, causal = f"outage-run-{n % 4}", f"o{n}"
        pick = rng.random()
        if pick < 0.4:
            bodies.append(
                syscall_body(run, causal, "files.append", {"path": f"{run}.log", "line": causal})
            )
        elif pick < 0.8:
            payload = {"path": f"w/{causal}.txt", "content": causal}
            bodies.append(syscall_body(run, causal, "files.write", payload))
        else:
            bodies.append(syscall_body(run, causal, "echo", {"n": n}))
    return bodies


async def _outage_under_load(
    served: Served, cluster: PrivateCluster, tokens: dict[str, str], tally: Tally
) -> dict[str, Any]:
    bodies = _actions()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    answers: dict[str, dict[str, Any]] = {}
    readyz: list[tuple[str, int]] = []
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=CLIENTS + 2)) as client:
        agent = PatientAgent(
            client,
            [served.base_url],
            tokens["acme:agent"],
            tokens["acme:approver"],
            tally,
            request_timeout_s=DEADLINE_S + 5,
        )

        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                answers[body["causal_id"]] = await agent.settle(body, give_up_after_s=120)

        async def probe(phase: str, seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                try:
                    got = await client.get(f"{served.base_url}/readyz", timeout=DEADLINE_S + 5)
                    readyz.append((phase, got.status_code))
                except httpx.TransportError:
                    readyz.append((phase, -1))
                await asyncio.sleep(0.2)

        async def outage() -> float:
            while len(answers) < ACTIONS // 4:  # noqa: ASYNC110 - progress is the signal
                await asyncio.sleep(0.01)
            await asyncio.to_thread(cluster.stop, "fast")
            await probe("outage", OUTAGE_S)
            await asyncio.to_thread(cluster.start)
            back = time.monotonic()
            while True:
                got = await client.get(f"{served.base_url}/readyz", timeout=DEADLINE_S + 5)
                if got.status_code == 200:
                    return time.monotonic() - back
                await asyncio.sleep(0.1)

        outage_task = asyncio.create_task(outage())
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        healthy_after = await outage_task
    return {"bodies": bodies, "answers": answers, "readyz": readyz, "healthy_after": healthy_after}


def _wait_settled(url: str, timeout_s: float = 90) -> int:
    """Held results are journaled by the instance once the store is back."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = int(_sql(url, "SELECT count(*) FROM attempts")[0][0])
        if left == 0 or time.monotonic() > deadline:
            return left
        time.sleep(0.25)


def test_a_database_outage_answers_503_in_time_and_loses_nothing(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    url = create_database(cluster.url)
    upgrade(url)
    tokens = asyncio.run(mint_keys(url, tenants=("acme",)))
    served = Served(
        url,
        tmp_path,
        instance_id="outage-instance",
        env={"ARVIS_REQUEST_TIMEOUT_S": str(DEADLINE_S)},
    )
    served.start()
    tally = Tally()
    try:
        outcome = asyncio.run(_outage_under_load(served, cluster, tokens, tally))
        unsettled = _wait_settled(url)
        still_running = served.process is not None and served.process.poll() is None
        with httpx.Client() as client:
            healthy = client.get(f"{served.base_url}/readyz").status_code == 200
    finally:
        served.terminate()

    answers: dict[str, dict[str, Any]] = outcome["answers"]
    journaled = {
        (key, attempt)
        for key, attempt in _sql(
            url, "SELECT idempotency_key, attempt FROM journal_entries WHERE kind = 'execution'"
        )
    }
    lines: Counter[tuple[str, str]] = Counter()
    for log in (tmp_path / "sandbox").glob("*.log"):
        lines.update((log.stem, line) for line in log.read_text().splitlines())
    lost, duplicated = [], []
    for body in outcome["bodies"]:
        answer = answers[body["causal_id"]]
        key = (answer["idempotency_key"], answer["attempt"])
        if answer["outcome"] == "executed" and key not in journaled:
            lost.append(body["causal_id"])
        if body["decision"]["tool"] == "files.append":
            seen = lines[(body["run_id"], body["causal_id"])]
            if seen > 1:
                duplicated.append(body["causal_id"])
            if answer["boundary"] == "EFFECT_COMPLETED" and seen != 1:
                lost.append(body["causal_id"])
    held = sum(
        1 for a in answers.values() if a.get("audit_incomplete") and a["journal_position"] is None
    )
    readyz = Counter(outcome["readyz"])
    five_xx = tally.count(lambda s: s >= 500)
    other_5xx = tally.count(lambda s: s >= 500 and s != 503)
    not_store = {
        c: n
        for c, n in tally.codes.items()
        if c not in ("store_unavailable", "attempt_in_flight", "already_approved")
    }
    report(
        f"outage: {ACTIONS} actions, {OUTAGE_S} s outage, {five_xx} x 503"
        f" ({tally.codes.get('store_unavailable', 0)} store_unavailable), {other_5xx} other 5xx,"
        f" slowest answer {tally.slowest_s:.2f} s (deadline {DEADLINE_S:g} s),"
        f" {tally.client_timeouts} hangs, readyz 503 x {readyz[('outage', 503)]} during the outage,"
        f" ready {outcome['healthy_after']:.2f} s after PostgreSQL returned without a restart,"
        f" {len(lost)} lost, {len(duplicated)} duplicate effects, {held} results held and journaled"
        f" late, {unsettled} unsettled intents"
    )
    assert other_5xx == 0
    assert not_store == {}, not_store
    assert tally.client_timeouts == 0
    assert tally.slowest_s <= DEADLINE_S + 1.0
    assert readyz[("outage", 503)] > 0
    assert readyz[("outage", 200)] == 0
    assert still_running
    assert healthy
    assert served.starts == 1
    assert lost == []
    assert duplicated == []
    assert unsettled == 0
    assert len(answers) == ACTIONS

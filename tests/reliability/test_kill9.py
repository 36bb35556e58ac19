"""Scenario 1: ``arvis serve`` SIGKILLed at random moments under concurrent load.

Clients re-post every action whose answer they lost, with the same ids. After
the last restart: no ``files.append`` line was written twice, every intent is
settled, every uncertain outcome is journaled ``EFFECT_STATE_UNKNOWN`` and its
re-post refused, and every run's chain verifies.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import citus
from tests.support.citus import function_calls
from tests.support.http import mint_keys
from tests.support.postgres import sql as _sql
from tests.support.reliability import (
    PatientAgent,
    Served,
    Tally,
    auth,
    report,
    size,
    syscall_body,
)

pytestmark = [pytest.mark.db, pytest.mark.reliability]

ACTIONS = size(ci=120, full=2000)
KILLS = size(ci=3, full=20)
RUNS = size(ci=4, full=10)
CLIENTS = 8


def _actions(seed: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    rng = random.Random(seed)
    actions = []
    for n in range(ACTIONS):
        run = f"kill9-run-{n % RUNS}"
        causal = f"a{n}"
        if rng.random() < 0.6:
            actions.append((run, causal, "files.append", {"path": f"{run}.log", "line": causal}))
        else:
            payload = {"path": f"w/{causal}.txt", "content": f"content of {causal}"}
            actions.append((run, causal, "files.write", payload))
    return actions


async def _load(served: Served, tokens: dict[str, str], tally: Tally) -> dict[str, Any]:
    actions = _actions(seed=9)
    rng = random.Random(99)
    # Kill at random points of progress, so the kills spread over the whole load.
    kill_points = sorted(rng.sample(range(ACTIONS // 20, ACTIONS - ACTIONS // 20), KILLS))
    answers: dict[str, dict[str, Any]] = {}
    queue: asyncio.Queue[tuple[str, str, str, dict[str, Any]]] = asyncio.Queue()
    for action in actions:
        queue.put_nowait(action)
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(limits=limits) as client:
        agent = PatientAgent(
            client, [served.base_url], tokens["acme:agent"], tokens["acme:approver"], tally
        )

        async def worker() -> None:
            while not queue.empty():
                run, causal, tool, payload = queue.get_nowait()
                answers[causal] = await agent.settle(syscall_body(run, causal, tool, payload))

        async def killer() -> int:
            kills = 0
            for point in kill_points:
                while len(answers) < point:  # noqa: ASYNC110 - progress is the signal
                    await asyncio.sleep(0.005)
                await asyncio.sleep(rng.uniform(0, 0.05))
                served.kill9()
                kills += 1
                await asyncio.to_thread(served.start)
            return kills

        killing = asyncio.create_task(killer())
        await asyncio.gather(*(worker() for _ in range(CLIENTS)))
        kills = await killing
        unknown_reposts = await _repost_unknowns(client, served, tokens, actions)
        chains = await _verify_chains(client, served, tokens)
    return {
        "actions": actions,
        "answers": answers,
        "kills": kills,
        "unknown_reposts": unknown_reposts,
        "chains": chains,
    }


async def _repost_unknowns(
    client: httpx.AsyncClient,
    served: Served,
    tokens: dict[str, str],
    actions: list[tuple[str, str, str, dict[str, Any]]],
) -> dict[str, Any]:
    """Re-post every action journaled uncertain; an unsafe one must be refused."""
    unknown = {
        (row[0], row[1])
        for row in _sql(
            served.database_url,
            "SELECT run_id, causal_id FROM journal_entries WHERE boundary IN"
            " ('EFFECT_STATE_UNKNOWN', 'EFFECT_STARTED')",
        )
    }
    answers: dict[str, Any] = {}
    for run, causal, tool, payload in actions:
        if (run, causal) in unknown and tool == "files.append":
            response = await client.post(
                f"{served.base_url}/v1/syscalls",
                json=syscall_body(run, causal, tool, payload),
                headers=auth(tokens["acme:agent"]),
            )
            assert response.status_code == 200, response.text
            answers[causal] = response.json()
    return answers


async def _verify_chains(
    client: httpx.AsyncClient, served: Served, tokens: dict[str, str]
) -> dict[str, dict[str, Any]]:
    runs = [row[0] for row in _sql(served.database_url, "SELECT run_id FROM runs ORDER BY 1")]
    verdicts = {}
    for run in runs:
        response = await client.get(
            f"{served.base_url}/v1/runs/{run}/verify", headers=auth(tokens["acme:auditor"])
        )
        assert response.status_code == 200, response.text
        verdicts[run] = response.json()
    return verdicts


def test_sigkill_under_load_loses_nothing_and_runs_nothing_twice(
    database_url: str, tmp_path: Path
) -> None:
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",)))
    # A fixed instance id: each restart takes over the killed predecessor's lease name
    # (its process is provably gone) and settles what it left at start-up.
    served = Served(database_url, tmp_path, instance_id="kill9-instance")
    served.start()
    tally = Tally()
    try:
        outcome = asyncio.run(_load(served, tokens, tally))
    finally:
        served.terminate()
    # Graceful stop released the lease; one more sweep settles anything left.
    env = {
        "ARVIS_DATABASE_URL": database_url,
        "ARVIS_DATA_DIR": str(tmp_path),
        "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
    }
    recovered = subprocess.run(
        [sys.executable, "-m", "arvis", "recover"],
        env={**__import__("os").environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recovered.returncode == 0, recovered.stderr

    actions = outcome["actions"]
    answers: dict[str, dict[str, Any]] = outcome["answers"]
    sandbox = tmp_path / "sandbox"
    lines: Counter[tuple[str, str]] = Counter()
    for log in sandbox.glob("*.log"):
        for line in log.read_text().splitlines():
            lines[(log.stem, line)] += 1
    duplicates = sum(n - 1 for n in lines.values() if n > 1)
    unsettled = _sql(database_url, "SELECT count(*) FROM attempts")[0][0]
    # Uncertain: the tool may have run. EFFECT_STARTED when it had reported its start
    # before the kill, EFFECT_STATE_UNKNOWN when not even that is known.
    unknown_rows = [
        (run, causal)
        for run, causal, _ in _sql(
            database_url,
            "SELECT run_id, causal_id, boundary FROM journal_entries WHERE boundary IN"
            " ('EFFECT_STATE_UNKNOWN', 'EFFECT_STARTED')",
        )
    ]
    started = _sql(
        database_url, "SELECT count(*) FROM journal_entries WHERE boundary = 'EFFECT_STARTED'"
    )[0][0]
    unknown_appends = {
        (run, causal)
        for run, causal, tool, _ in actions
        if tool == "files.append" and (run, causal) in set(unknown_rows)
    }
    lost = []
    for run, causal, tool, payload in actions:
        answer = answers[causal]
        if tool == "files.append":
            if (run, causal) in unknown_appends:
                assert answer["outcome"] == "refused", answer
                assert answer["reason"] == "retry_prohibited_uncertain", answer
                assert lines[(run, causal)] <= 1
            else:
                assert answer["boundary"] == "EFFECT_COMPLETED", answer
                if lines[(run, causal)] != 1:
                    lost.append(causal)
        else:
            assert answer["boundary"] == "EFFECT_COMPLETED", answer
            written = sandbox / payload["path"]
            if not written.exists() or written.read_text() != payload["content"]:
                lost.append(causal)
    reposts = outcome["unknown_reposts"]
    refused = sum(
        1
        for a in reposts.values()
        if a["outcome"] == "refused" and a["reason"] == "retry_prohibited_uncertain"
    )
    broken = [(run, v) for run, v in outcome["chains"].items() if not v["ok"]]
    report(
        f"kill-9: {len(actions)} actions, {outcome['kills']} kills, {duplicates} duplicate effects,"
        f" {unsettled} unsettled intents, {len(unknown_rows)} uncertain ({started} started)"
        f" ({refused} unsafe re-posts refused retry_prohibited_uncertain),"
        f" {len(lost)} lost, {len(broken)} broken chains of {len(outcome['chains'])},"
        f" {tally.transport_errors} posts re-sent after a lost answer"
    )
    assert outcome["kills"] == KILLS
    assert duplicates == 0
    assert unsettled == 0
    assert lost == []
    assert refused == len(reposts) == len(unknown_appends)
    assert broken == []
    assert tally.count(lambda s: s >= 500 and s != 503) == 0
    if citus.SELECTED:
        # On Citus (make test-citus) every admission and append ran on the tenant's
        # worker, across kills and restarts: none fell back to the coordinator.
        calls = function_calls(database_url, ["arvis_admit_batch", "arvis_journal_batch"])
        report(f"kill-9 on Citus: {calls}")
        for step, counted in calls.items():
            assert counted.total > 0, step
            assert counted.pushed_down == counted.total, (step, counted)

"""Scenario 2: two ``arvis serve`` instances on one database, the same decisions to both.

Every decision is posted to both instances at once; exactly one of them runs it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http import mint_keys
from tests.support.postgres import sql as _sql
from tests.support.reliability import PatientAgent, Served, Tally, report, size, syscall_body

pytestmark = [pytest.mark.db, pytest.mark.reliability]

DECISIONS = size(ci=60, full=500)
CONCURRENCY = 6


def _decision(n: int) -> dict[str, Any]:
    run = f"twin-run-{n % 3}"
    causal = f"d{n}"
    if n % 2 == 0:
        return syscall_body(run, causal, "files.append", {"path": "shared.log", "line": causal})
    return syscall_body(
        run, causal, "files.write", {"path": f"w/{causal}.txt", "content": f"content of {causal}"}
    )


async def _post_everything_twice(
    servers: list[Served], tokens: dict[str, str], tally: Tally
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    limits = httpx.Limits(max_connections=4 * CONCURRENCY)
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(limits=limits) as client:
        agent = PatientAgent(
            client,
            [s.base_url for s in servers],
            tokens["acme:agent"],
            tokens["acme:approver"],
            tally,
        )

        async def both(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
            body = _decision(n)
            async with gate:
                if body["decision"]["tool"] == "files.append":
                    # Consent first, through one instance; both then race on the approved action.
                    pending = await client.post(
                        f"{servers[0].base_url}/v1/syscalls", json=body, headers=agent.agent
                    )
                    assert pending.status_code == 202, pending.text
                    await agent._approve(
                        servers[1].base_url, pending.json()["confirmation"]["id"], 1e18
                    )
                first, second = await asyncio.gather(
                    agent.settle(body, server=0), agent.settle(body, server=1)
                )
                return first, second

        return await asyncio.gather(*(both(n) for n in range(DECISIONS)))


def test_two_instances_on_one_database_run_each_decision_exactly_once(
    database_url: str, tmp_path: Path
) -> None:
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",)))
    # One sandbox for both instances, as two replicas behind a balancer would share a volume.
    servers = [Served(database_url, tmp_path, instance_id=f"twin-{n}") for n in (1, 2)]
    starting = [threading.Thread(target=s.start) for s in servers]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    tally = Tally()
    try:
        pairs = asyncio.run(_post_everything_twice(servers, tokens, tally))
    finally:
        for server in servers:
            server.terminate()

    executions = Counter(
        key
        for (key,) in _sql(
            database_url, "SELECT idempotency_key FROM journal_entries WHERE kind = 'execution'"
        )
    )
    # Every consumed capability is on record: its attempt's entry, or its row in flight.
    consumed = Counter(
        key
        for (key,) in _sql(
            database_url,
            "SELECT idempotency_key FROM journal_entries WHERE kind IN ('execution', 'recovery')"
            " UNION ALL SELECT idempotency_key FROM attempts",
        )
    )
    keys = {answer["idempotency_key"] for pair in pairs for answer in pair}
    twice = [key for key in keys if executions[key] != 1 or consumed[key] != 1]
    lines = Counter((tmp_path / "sandbox" / "shared.log").read_text().splitlines())
    appended = [
        b for b in map(_decision, range(DECISIONS)) if b["decision"]["tool"] == "files.append"
    ]
    wrong_lines = [b["causal_id"] for b in appended if lines[b["causal_id"]] != 1]
    outcomes = Counter(answer["outcome"] for pair in pairs for answer in pair)
    disagree = [
        first["idempotency_key"]
        for first, second in pairs
        if (first["journal_position"], first["result"])
        != (second["journal_position"], second["result"])
    ]
    in_flight = tally.codes.get("attempt_in_flight", 0)
    report(
        f"two-instances: {DECISIONS} decisions x 2 instances,"
        f" {sum(executions.values())} executions,"
        f" {len(twice)} keys run other than once, {len(wrong_lines)} duplicate or missing lines,"
        f" {outcomes['deduplicated']} deduplicated answers, {in_flight} attempt_in_flight refusals"
    )
    assert len(keys) == DECISIONS
    assert twice == []
    assert wrong_lines == []
    assert disagree == []
    assert outcomes["executed"] == DECISIONS
    assert tally.count(lambda s: s >= 500) == 0

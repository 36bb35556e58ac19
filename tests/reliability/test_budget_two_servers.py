"""A budget holds exactly across instances: many concurrent callers on two ``arvis serve``
processes over one database end exactly at the limit (issue 18)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http import mint_keys
from tests.support.postgres import sql as _sql
from tests.support.reliability import Served, auth, report, size, syscall_body

pytestmark = [pytest.mark.db, pytest.mark.reliability]

LIMIT = size(ci=25, full=200)
CALLERS = size(ci=80, full=800)
CONCURRENCY = 16
CONFIG = f"""
[[budgets]]
name = "calls"
tools = ["echo"]
limit = {LIMIT}
per = "1d"

[[budgets]]
name = "spend"
tools = ["echo"]
field = "cents"
limit = 1000000
per = "1d"
"""


async def _race(servers: list[Served], token: str) -> list[dict[str, Any]]:
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=2 * CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def call(n: int) -> dict[str, Any]:
            body = syscall_body(
                f"budget-run-{n % 9}",
                f"c{n}",
                "echo",
                {"n": n, "cents": 1.5},
            )
            async with gate:
                response = await client.post(
                    f"{servers[n % 2].base_url}/v1/syscalls", json=body, headers=auth(token)
                )
            assert response.status_code == 200, response.text
            answer: dict[str, Any] = response.json()
            return answer

        return await asyncio.gather(*(call(n) for n in range(CALLERS)))


def test_many_callers_on_two_servers_end_exactly_at_the_budget(
    database_url: str, tmp_path: Path
) -> None:
    # Each admission takes both budgets' rows, in one order, in one statement.
    (tmp_path / "arvis.toml").write_text(CONFIG)
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",)))
    servers = [Served(database_url, tmp_path, instance_id=f"budget-{n}") for n in (1, 2)]
    starting = [threading.Thread(target=s.start) for s in servers]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    try:
        answers = asyncio.run(_race(servers, tokens["acme:agent"]))
    finally:
        for server in servers:
            server.terminate()

    outcomes = Counter(a["reason"] or a["outcome"] for a in answers)
    used = dict(_sql(database_url, "SELECT budget, used FROM budget_usage"))
    executions = _sql(database_url, "SELECT count(*) FROM journal_entries WHERE kind = 'execution'")
    report(
        f"budget-two-servers: {CALLERS} callers ({CONCURRENCY} at a time) on 2 servers,"
        f" limit {LIMIT}: {outcomes['executed']} executed,"
        f" {outcomes['budget_exceeded']} refused budget_exceeded, used {used.get('calls')}"
    )
    assert outcomes == Counter({"executed": LIMIT, "budget_exceeded": CALLERS - LIMIT})
    assert used == {"calls": LIMIT, "spend": Decimal("1.5") * LIMIT}
    assert executions == [(LIMIT,)]

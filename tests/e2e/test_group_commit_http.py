"""Group commit over HTTP (issue 25): posts of one tenant that queue behind its admission
statement in flight are admitted in one transaction — their decisions carry one
transaction id — and each is answered as if it had gone alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from arvis.kernel import Kernel
from tests.support.http import Api
from tests.support.postgres import run_lock_held


async def until(ready: Callable[[], bool]) -> None:
    while not ready():  # noqa: ASYNC110 - the batcher's queue is the signal
        await asyncio.sleep(0.005)


async def test_posts_queued_behind_a_commit_are_admitted_in_one_transaction(api: Api) -> None:
    kernel: Kernel = api.app.state.kernel
    admissions = kernel.resources.store.ops.admissions
    # The lone post's admission waits for this run's lock; the others queue behind it.
    async with run_lock_held(api.database_url, "acme", "gc-held"):
        lone = asyncio.ensure_future(
            api.syscall("echo", {"n": 0}, run_id="gc-held", causal_id="gc-0")
        )
        await until(lambda: admissions.waiting("acme") == 0 and bool(admissions.sizes))
        rest = [
            asyncio.ensure_future(
                api.syscall("echo", {"n": n}, run_id=f"gc-run-{n}", causal_id=f"gc-{n}")
            )
            for n in range(1, 6)
        ]
        await until(lambda: admissions.waiting("acme") == 5)
    answers = [await lone, *await asyncio.gather(*rest)]
    assert [a.status_code for a in answers] == [200] * 6
    assert [a.json()["outcome"] for a in answers] == ["executed"] * 6
    transactions = api.sql(
        "SELECT count(DISTINCT xmin::text) FROM decisions"
        " WHERE tenant_id = 'acme' AND run_id LIKE 'gc-run-%%'"
    )
    assert transactions == [(1,)]

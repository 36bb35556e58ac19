"""Group commit (issue 25): commits per governed call, and the batch sizes, at c = 1 and 32.

``python -m bench.groupcommit [--calls N] [--rounds R]``: the in-process kernel
(``bench.kernel``) with C concurrent agents, each on runs of its own, posting ``echo``
back to back. Per block it reads the database's commits (``pg_stat_database``
``xact_commit``) before the kernel opens and after it closed — closing the pool
flushes every backend's counters — less what opening and closing an idle kernel costs
(measured first), divided by the calls; and the sizes of the batches the admission and
journal lanes sent (``arvis.store.batching.GroupCommit.sizes``). Run on a database no
other work writes to (the figure makes its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from typing import Any

import psycopg

from arvis.store.engine import libpq_url
from arvis.store.migrate import upgrade
from bench.kernel import open_kernel
from bench.pg import choose_server

RUN_LENGTH = 250


def _commits(url: str) -> int:
    time.sleep(1.2)  # a closed backend's counters reach the shared statistics first
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def _block(
    url: str, concurrency: int, calls: int, tag: str, sizes: dict[str, Counter[int]]
) -> tuple[int, int, list[float], float]:
    per_agent = calls // concurrency
    latencies: list[float] = []
    before = _commits(url)
    async with open_kernel(url, tag) as kernel:

        async def agent(number: int) -> None:
            for k in range(per_agent):
                start = time.perf_counter()
                await kernel.syscall(run_id=f"{tag}-a{number}-{k // RUN_LENGTH}")
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(agent(n) for n in range(concurrency)))
        wall = time.perf_counter() - start
        sizes["admissions"].update(kernel.store.ops.admissions.sizes)
        sizes["journals"].update(kernel.store.ops.journals.sizes)
    return per_agent * concurrency, _commits(url) - before, latencies, wall


async def measure(url: str, *, calls: int, rounds: int) -> dict[str, Any]:
    upgrade(url)
    stamp = int(time.time())
    scratch: dict[str, Counter[int]] = {"admissions": Counter(), "journals": Counter()}
    await _block(url, 1, 100, f"gc{stamp}-warm", scratch)
    idle = [(await _block(url, 1, 0, f"gc{stamp}-idle{n}", scratch))[1] for n in range(2)]
    overhead = statistics.median(idle)
    result: dict[str, Any] = {"idle_kernel_commits": idle, "blocks": [], "batch_sizes": {}}
    for concurrency in (1, 32):
        sizes: dict[str, Counter[int]] = {"admissions": Counter(), "journals": Counter()}
        for number in range(rounds):
            count = calls if concurrency > 1 else calls // 4
            done, commits, latencies, wall = await _block(
                url, concurrency, count, f"gc{stamp}-c{concurrency}-r{number}", sizes
            )
            block = {
                "c": concurrency,
                "calls": done,
                "p50_ms": round(statistics.median(latencies) * 1000, 3),
                "per_s": round(done / wall, 1),
                "commits_per_call": round((commits - overhead) / done, 3),
            }
            result["blocks"].append(block)
            print(json.dumps(block), flush=True)
        result["batch_sizes"][f"c{concurrency}"] = {
            name: {
                "statements": sum(counts.values()),
                "mean": round(sum(k * v for k, v in counts.items()) / sum(counts.values()), 2),
                "sizes": dict(sorted(counts.items())),
            }
            for name, counts in sizes.items()
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1600, help="governed calls per c=32 block")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = choose_server()
    try:
        url = server.create_database("groupcommit")
        result = asyncio.run(measure(url, calls=args.calls, rounds=args.rounds))
    finally:
        server.close()
    print(json.dumps(result["batch_sizes"], indent=2))


if __name__ == "__main__":
    main()

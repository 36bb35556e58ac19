"""Figure 18: the cuts of issue 25, each side by side with the code before it.

- **The API-key lookup.** ``PgKeyStore.authenticated`` with the revocation-listened
  cache (arvis.store.keycache) against the same store with its cache closed (the code
  before: one prepared ``SELECT`` per request), in alternating blocks on one database:
  latency and CPU per lookup.
- **psycopg's async path.** The admitting statement (``arvis_admit``, with the
  arguments of an ``echo`` call, as bench/floor.py's statements-alone figure sends
  them) three ways in alternating blocks: as the store runs it today (a checkout of
  the pool per statement, prepared, text parameters), with binary parameters and
  results, and on one connection held by the caller (what a checkout costs). Measured
  to decide, not all adopted: docs/benchmarks.md says which measured better.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from arvis.store.database import PgStore
from arvis.store.engine import libpq_url
from arvis.store.keys import PgKeyStore
from arvis.store.statements import ADMIT_SQL
from bench.floor import Statements
from bench.httpfloor import open_pool
from bench.stats import ratio, summary_ms


async def measure_key_lookup(url: str, *, rounds: int, lookups: int) -> dict[str, Any]:
    store = await PgStore.open(url, pool_size=2)
    keys = PgKeyStore(store.engine, store.ops)
    listener = keys.listener()
    try:
        _, issued = await keys.create("bench", "bench", ["agent"])
        await listener.start()
        if not keys.cache.live:
            raise RuntimeError("the revocation listener did not start")
        samples: dict[str, list[float]] = {"before": [], "cached": []}
        cpu = dict.fromkeys(samples, 0.0)
        per_round: list[float | None] = []
        for _ in range(rounds):
            block: dict[str, float] = {}
            for name in samples:
                if name == "before":
                    keys.cache.close()  # the code before: no cache, one read per request
                else:
                    keys.cache.open()
                cpu0 = time.process_time()
                for _ in range(lookups // rounds):
                    start = time.perf_counter()
                    if await keys.authenticated(issued.token) is None:
                        raise RuntimeError("the bench key was refused")
                    samples[name].append(time.perf_counter() - start)
                block[name] = time.process_time() - cpu0
                cpu[name] += block[name]
            per_round.append(ratio(block["cached"], block["before"]))
    finally:
        await listener.stop()
        await store.close()
    count = lookups // rounds * rounds
    present = [v for v in per_round if v is not None]
    return {
        **{name: summary_ms(s) for name, s in samples.items()},
        **{f"{name}_cpu_ms_per_lookup": round(c / count * 1000, 4) for name, c in cpu.items()},
        "median_round_cached_cpu_over_before": round(statistics.median(present), 3)
        if present
        else None,
    }


async def measure_statement_paths(url: str, *, rounds: int, statements: int) -> dict[str, Any]:
    pool = open_pool(url, max_size=2)
    await pool.open(wait=True)
    held = await psycopg.AsyncConnection.connect(
        libpq_url(url), autocommit=True, prepare_threshold=0
    )
    numbers = iter(range(10**9))
    try:
        await held.execute(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')"
            " ON CONFLICT DO NOTHING",
            (Statements.PLAN,),
        )

        async def pooled(binary: bool) -> None:
            async with pool.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row, binary=binary)
                await cursor.execute(
                    ADMIT_SQL, Statements.admit_args(next(numbers), "cut"), binary=binary
                )
                await cursor.fetchone()

        async def on_held() -> None:
            cursor = held.cursor(row_factory=tuple_row)
            await cursor.execute(ADMIT_SQL, Statements.admit_args(next(numbers), "cut"))
            await cursor.fetchone()

        variants = {
            "today_pooled_text": lambda: pooled(False),
            "pooled_binary": lambda: pooled(True),
            "held_connection": on_held,
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        cpu = dict.fromkeys(variants, 0.0)
        for run in variants.values():
            for _ in range(50):
                await run()
        for _ in range(rounds):
            for name, run in variants.items():
                cpu0 = time.process_time()
                for _ in range(statements // rounds):
                    start = time.perf_counter()
                    await run()
                    samples[name].append(time.perf_counter() - start)
                cpu[name] += time.process_time() - cpu0
    finally:
        await held.close()
        await pool.close()
    return {
        **{name: summary_ms(s) for name, s in samples.items()},
        **{
            f"{name}_cpu_us_per_statement": round(c / len(samples[name]) * 1e6, 1)
            for name, c in cpu.items()
        },
    }

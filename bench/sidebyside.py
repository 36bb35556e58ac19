"""Figures 1-3 side by side: the floor, the kernel and DBOS in alternating blocks.

This machine's speed drifts by tens of percent within minutes, so figures taken
one after another can disagree by more than the differences being measured.
Each round runs a block of each in turn on the same server; every figure pools
its blocks, and each round's own ratios are kept to show the spread.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.floor import Floor, Statements, floor_result
from bench.httpbench import vacuuming
from bench.kernel import open_kernel
from bench.peer_dbos import DbosPeer
from bench.stats import percentile, ratio, summary_ms


async def measure_side_by_side(
    url: str,
    peer: DbosPeer | None,
    *,
    rounds: int,
    floor_pairs: int,
    kernel_syscalls: int,
    dbos_workflows: int,
    warmup: int,
) -> dict[str, Any]:
    explicit: list[float] = []
    autocommit: list[float] = []
    kernel_samples: list[float] = []
    statement_samples: list[float] = []
    dbos_samples: list[float] = []
    kernel_cpu = kernel_wall = dbos_cpu = 0.0
    per_round: list[dict[str, float | None]] = []
    with vacuuming(url), Floor(url) as floor, Statements(url) as statements:
        async with open_kernel(url, "kernel") as kernel:
            floor.pairs("explicit", 50)
            floor.pairs("autocommit", 50)
            statements.pairs(50)
            await kernel.timed(warmup)
            for _ in range(rounds):
                block_explicit = floor.pairs("explicit", floor_pairs // rounds)
                autocommit += floor.pairs("autocommit", floor_pairs // rounds)
                statement_samples += statements.pairs(kernel_syscalls // rounds)
                cpu0, wall0 = time.process_time(), time.perf_counter()
                block_kernel = await kernel.timed(kernel_syscalls // rounds)
                kernel_cpu += time.process_time() - cpu0
                kernel_wall += time.perf_counter() - wall0
                block_dbos: list[float] = []
                if peer is not None:
                    block_dbos, cpu = peer.sequential(dbos_workflows // rounds)
                    dbos_cpu += cpu
                explicit += block_explicit
                kernel_samples += block_kernel
                dbos_samples += block_dbos
                per_round.append(_round_ratios(block_explicit, block_kernel, block_dbos))
    result: dict[str, Any] = {
        "floor": floor_result(explicit, autocommit),
        "kernel": {
            "syscall": summary_ms(kernel_samples),
            "throughput_per_s": round(len(kernel_samples) / kernel_wall, 1),
            "client_cpu_ms_per_syscall": round(kernel_cpu / len(kernel_samples) * 1000, 4),
        },
        "statements": {
            "pair": summary_ms(statement_samples),
            "what": "arvis_admit + the journal step from psycopg, no ARVIS Python",
        },
        "side_by_side": {
            "rounds": per_round,
            "median_round_kernel_over_floor": _median(per_round, "kernel_over_floor"),
            "median_round_dbos_over_kernel": _median(per_round, "dbos_over_kernel"),
        },
    }
    if peer is not None:
        result["peer_sequential"] = {
            "sequential": summary_ms(dbos_samples),
            "client_cpu_ms_per_workflow": round(dbos_cpu / len(dbos_samples) * 1000, 4),
        }
    return result


def _round_ratios(
    floor: list[float], kernel: list[float], dbos: list[float]
) -> dict[str, float | None]:
    floor_p50, kernel_p50 = percentile(floor, 50), percentile(kernel, 50)
    dbos_p50 = percentile(dbos, 50) if dbos else None
    return {
        "floor_p50_ms": round(floor_p50 * 1000, 4),
        "kernel_p50_ms": round(kernel_p50 * 1000, 4),
        "dbos_p50_ms": round(dbos_p50 * 1000, 4) if dbos_p50 else None,
        "kernel_over_floor": ratio(kernel_p50, floor_p50),
        "dbos_over_kernel": ratio(dbos_p50, kernel_p50),
    }


def _median(rounds: list[dict[str, float | None]], key: str) -> float | None:
    values = [v for r in rounds if (v := r[key]) is not None]
    return round(statistics.median(values), 3) if values else None

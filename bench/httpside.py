"""Figure 17: ARVIS over HTTP beside the HTTP floor (bench/httpfloor.py), in one run.

Both served by the same uvicorn configuration with two workers, on the same
PostgreSQL, driven by the same load client (bench/loadgen.py, its own process), in
alternating blocks (bench/sidebyside.py says why) at each concurrency; DBOS's
threaded blocks (8 and 32 threads) alternate with them. Beside latency and
throughput, each block's CPU: the serve processes' (psutil, all workers) and the
load client's, per call. Then, at c = 32, what a governed call costs the database:
commits (``pg_stat_database.xact_commit`` of the benchmark database) and WAL
(this database's records with ``pg_walinspect``, else the server's LSN) per call.

And in-process, the CPU a governed call costs the kernel beside the CPU the same two
autocommit INSERTs cost on the same kind of pool (the in-process async floor).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from arvis.store.engine import libpq_url
from bench.floor import DDL
from bench.httpbench import (
    HttpUnavailable,
    create_agent_key,
    run_load,
    serve,
    served,
    vacuuming,
)
from bench.httpfloor import open_pool, two_inserts
from bench.kernel import open_kernel
from bench.peer_dbos import DbosPeer
from bench.stats import percentile, ratio, summary_ms
from bench.writeset import WalCounter

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCIES = (1, 8, 32, 128)
DBOS_THREADS = (8, 32)
# An idle backend flushes its statistics within 10 s (PGSTAT_IDLE_INTERVAL).
SETTLE_S = 10.5


@contextmanager
def serve_floor(url: str, workers: int = 2) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The HTTP floor (bench/httpfloor.py) with ``workers`` workers, once ready."""
    with served(
        lambda port: [sys.executable, "-m", "bench.httpfloor", url, str(port), str(workers)],
        {**os.environ, "PYTHONPATH": str(ROOT)},
        "floor",
        cwd=ROOT,
    ) as running:
        yield running


def serve_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a serve process and all its children so far."""
    import psutil

    parent = psutil.Process(pid)
    total = 0.0
    for process in [parent, *parent.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _block(
    base: str, pid: int, token: str, concurrency: int, requests: int, tag: str
) -> dict[str, Any]:
    before = serve_cpu_s(pid)
    result = run_load(base, token, concurrency, requests, tag, samples=True)
    result["server_cpu_s"] = serve_cpu_s(pid) - before
    if result["errors"]:
        raise HttpUnavailable(f"{tag}: {result['errors']} errors, e.g. {result['error_samples']}")
    return result


def _pool(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for b in blocks for x in b["latencies_s"]]
    elapsed = sum(b["elapsed_s"] for b in blocks)
    return {
        "requests": len(latencies),
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        "latency": summary_ms(latencies),
        "server_cpu_ms_per_call": round(
            sum(b["server_cpu_s"] for b in blocks) / len(latencies) * 1000, 4
        ),
        "client_cpu_ms_per_call": round(sum(b["cpu_s"] for b in blocks) / len(latencies) * 1000, 4),
    }


def _counters(url: str) -> tuple[int, int]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _database_cost(
    url: str, base: str, pid: int, token: str, requests: int, tag: str, settle_s: float
) -> dict[str, Any]:
    """Commits and WAL per call over one c = 32 block on the database at ``url``.

    The database commits on its own too (lease heartbeats, the revocation listeners'
    checks, the stand-in vacuum, these counters' own reads): an idle interval as long
    as the settle before it gives that background rate, and ``net`` subtracts it."""
    time.sleep(settle_s)  # what came before is counted before the idle interval starts
    idle0 = _counters(url)[0]
    time.sleep(settle_s)
    commits0, lsn0 = _counters(url)
    background_per_s = (commits0 - idle0) / settle_s
    block = _block(base, pid, token, 32, requests, tag)
    time.sleep(settle_s)
    commits1, lsn1 = _counters(url)
    wal = WalCounter(url)
    wal.count(lsn0, lsn1)
    calls = block["requests"]
    commits = commits1 - commits0
    ours = wal.total(commits)
    background = background_per_s * (block["elapsed_s"] + settle_s)
    return {
        "calls": calls,
        "commits_per_call": round(commits / calls, 3),
        "commits_per_call_net_of_background": round((commits - background) / calls, 3),
        "background_commits_per_s": round(background_per_s, 2),
        "wal_bytes_per_call": round((ours if ours is not None else lsn1 - lsn0) / calls, 1),
        "wal_counted": "this database's records (pg_walinspect)"
        if ours is not None
        else f"server LSN, others' writes included ({wal.why})",
        "throughput_per_s": block["throughput_per_s"],
    }


def measure_http_floor(
    url: str,
    floor_url: str,
    *,
    requests: int,
    rounds: int,
    per_agent: int,
    peer: DbosPeer | None = None,
    dbos_workflows: int = 0,
    cost_requests: int = 2000,
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """Figure 17 over HTTP. ``settle_s``: how long statistics are given to arrive
    before and after the c = 32 cost block (less than PostgreSQL's 10 s may undercount:
    only for a quick run that checks the figure works)."""
    env = {**os.environ, "ARVIS_DATABASE_URL": url, "ARVIS_LOG_LEVEL": "WARNING"}
    env["ARVIS_DATA_DIR"] = tempfile.mkdtemp(prefix="arvis-bench-data-")
    token, _ = create_agent_key(env)
    blocks: dict[str, dict[int, list[dict[str, Any]]]] = {
        who: {c: [] for c in CONCURRENCIES} for who in ("arvis", "floor")
    }
    per_round: list[dict[str, Any]] = []
    dbos_elapsed = dict.fromkeys(DBOS_THREADS, 0.0)
    dbos_count = dbos_workflows // rounds if peer is not None else 0
    with (
        serve(env) as (arvis_base, arvis),
        serve_floor(floor_url) as (floor_base, floor),
        vacuuming(url),
    ):
        servers = {"arvis": (arvis_base, arvis.pid), "floor": (floor_base, floor.pid)}
        for who, (base, pid) in servers.items():
            _block(base, pid, token, 8, 400, f"warm-{who}")
        for n in range(rounds):
            mine: dict[str, Any] = {}
            for c in CONCURRENCIES:
                # c = 1 at least 50: the first request of a block pays for connecting
                count = max(requests * max(1, c // 4) // rounds, c * per_agent, 50)
                for who, (base, pid) in servers.items():
                    block = _block(base, pid, token, c, count, f"{who}-c{c}-r{n}")
                    blocks[who][c].append(block)
                arvis_block, floor_block = blocks["arvis"][c][-1], blocks["floor"][c][-1]
                mine[f"c{c}_p50_over_floor"] = ratio(
                    percentile(arvis_block["latencies_s"], 50),
                    percentile(floor_block["latencies_s"], 50),
                )
                mine[f"c{c}_throughput_over_floor"] = ratio(
                    arvis_block["throughput_per_s"], floor_block["throughput_per_s"]
                )
            for threads in DBOS_THREADS:
                if dbos_count and peer is not None:
                    dbos_elapsed[threads] += peer.threaded(dbos_count, threads)
            per_round.append(mine)
        cost = {
            who: _database_cost(target, base, pid, token, cost_requests, f"cost-{who}", settle_s)
            for who, target, (base, pid) in (
                ("arvis", url, servers["arvis"]),
                ("floor", floor_url, servers["floor"]),
            )
        }
    result: dict[str, Any] = {
        "workers": 2,
        "rounds": rounds,
        "arvis": {f"c{c}": _pool(b) for c, b in blocks["arvis"].items()},
        "floor": {f"c{c}": _pool(b) for c, b in blocks["floor"].items()},
        "median_round": {
            key: _median([r[key] for r in per_round]) for key in (per_round[0] if per_round else {})
        },
        "rounds_detail": per_round,
        "database_cost_c32": cost,
    }
    if dbos_count:
        result["dbos"] = {
            f"threads_{t}": round(dbos_count * rounds / elapsed, 1)
            for t, elapsed in dbos_elapsed.items()
        }
    return result


async def measure_cpu_floor(url: str, floor_url: str, *, rounds: int, calls: int) -> dict[str, Any]:
    """In-process and sequential: the kernel's CPU per governed call beside the CPU of the
    same two autocommit INSERTs on a psycopg async pool like the kernel's."""
    kernel_cpu = floor_cpu = 0.0
    kernel_samples: list[float] = []
    floor_samples: list[float] = []
    per_round: list[float | None] = []
    pool = open_pool(floor_url)
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            await conn.execute(DDL)
        with vacuuming(url):
            async with open_kernel(url, "cpu") as kernel:
                await kernel.timed(100)
                for n in range(200):
                    await two_inserts(pool, n)
                for r in range(rounds):
                    cpu0 = time.process_time()
                    kernel_samples += await kernel.timed(calls // rounds)
                    block_kernel = time.process_time() - cpu0
                    cpu0 = time.process_time()
                    for n in range(calls // rounds):
                        start = time.perf_counter()
                        await two_inserts(pool, r * calls + n)
                        floor_samples.append(time.perf_counter() - start)
                    block_floor = time.process_time() - cpu0
                    kernel_cpu += block_kernel
                    floor_cpu += block_floor
                    per_round.append(ratio(block_kernel, block_floor))
    finally:
        await pool.close()
    count = len(kernel_samples)
    return {
        "kernel": {
            "syscall": summary_ms(kernel_samples),
            "cpu_ms_per_call": round(kernel_cpu / count * 1000, 4),
        },
        "async_floor": {
            "pair": summary_ms(floor_samples),
            "cpu_ms_per_call": round(floor_cpu / len(floor_samples) * 1000, 4),
        },
        "kernel_cpu_over_floor_cpu": ratio(kernel_cpu / count, floor_cpu / len(floor_samples)),
        "median_round_kernel_cpu_over_floor_cpu": _median(per_round),
        "kernel_p50_over_async_floor_p50": ratio(
            percentile(kernel_samples, 50), percentile(floor_samples, 50)
        ),
    }


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def render(figure: dict[str, Any]) -> str:
    lines = ["", "Figure 17: ARVIS over HTTP beside the HTTP floor (2 workers each, side by side)"]
    http = figure.get("http")
    if http:
        lines.append(
            f"{'':<6} {'ARVIS p50/p99 ms':>18} {'floor p50/p99 ms':>18} {'ARVIS/s':>8}"
            f" {'floor/s':>8} {'p50 ratio':>9} {'thr ratio':>9} {'srv CPU ms A/F':>15}"
            f" {'cli CPU ms A/F':>15}"
        )
        for c in CONCURRENCIES:
            a, f = http["arvis"][f"c{c}"], http["floor"][f"c{c}"]
            m = http["median_round"]
            lines.append(
                f"c={c:<4} {a['latency']['p50_ms']:>8.2f}/{a['latency']['p99_ms']:<9.2f}"
                f" {f['latency']['p50_ms']:>8.2f}/{f['latency']['p99_ms']:<9.2f}"
                f" {a['throughput_per_s']:>8} {f['throughput_per_s']:>8}"
                f" {m.get(f'c{c}_p50_over_floor')!s:>9} {m.get(f'c{c}_throughput_over_floor')!s:>9}"
                f" {a['server_cpu_ms_per_call']:>7.2f}/{f['server_cpu_ms_per_call']:<7.2f}"
                f" {a['client_cpu_ms_per_call']:>7.2f}/{f['client_cpu_ms_per_call']:<7.2f}"
            )
        if "dbos" in http:
            lines.append(f"DBOS threaded: {http['dbos']} per s")
        for who, cost in http["database_cost_c32"].items():
            lines.append(
                f"c=32 {who}: {cost['commits_per_call']} commits/call,"
                f" {cost['wal_bytes_per_call']} B WAL/call ({cost['wal_counted']})"
            )
    cpu = figure.get("cpu")
    if cpu:
        lines.append(
            f"in-process CPU per call: kernel {cpu['kernel']['cpu_ms_per_call']} ms,"
            f" async floor {cpu['async_floor']['cpu_ms_per_call']} ms:"
            f" {cpu['kernel_cpu_over_floor_cpu']} x (median of rounds"
            f" {cpu['median_round_kernel_cpu_over_floor_cpu']})"
        )
    return "\n".join(lines)

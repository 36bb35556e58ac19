"""Figure 8: throughput of 1, 2 and 4 ``serve`` processes against one PostgreSQL.

``python -m bench.scaling [--quick]``, ``python -m bench --only scaling`` or
``make bench-scaling``. The HTTP figure's load (bench/loadgen.py: C agents, each on its
own keep-alive connection and run, posting ``tool.execute`` of ``echo`` back to back)
against ``arvis serve --workers N`` for N = 1, 2, 4 on one database, in alternating
blocks as the other figures are (bench/sidebyside.py says why), each block on a server
started for it and warmed up, so that at most one server's pools are open at a time on
a PostgreSQL other work shares. Per block it also takes the CPU seconds of the ARVIS
workers, of the PostgreSQL backends serving the database, and of the whole machine, and the
database's commits: where the time goes as processes are added, and what one
PostgreSQL core can carry. WAL is measured apart, on a private embedded cluster
(``wal_per_call``): the machine's server is shared, and its WAL position counts every
database's writes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import psycopg
from sqlalchemy.engine import make_url

from arvis.store.engine import libpq_url
from bench.httpbench import (
    ARVIS,
    HttpUnavailable,
    create_agent_key,
    run_load,
    served,
    vacuuming,
)
from bench.stats import ratio, summary_ms

WORKERS = (1, 2, 4)


def measure_scaling(
    url: str, *, rounds: int, requests: int, concurrency: int = 32
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARVIS_")}
    env.update(
        ARVIS_DATABASE_URL=url,
        ARVIS_LOG_LEVEL="WARNING",
        ARVIS_DATA_DIR=tempfile.mkdtemp(prefix="arvis-bench-scaling-"),
    )
    token, _ = create_agent_key(env)
    blocks: dict[int, list[dict[str, Any]]] = {n: [] for n in WORKERS}
    with vacuuming(url):
        for round_no in range(rounds):
            # Rotate the order so no count always runs first (or right after the vacuum).
            order = WORKERS[round_no % len(WORKERS) :] + WORKERS[: round_no % len(WORKERS)]
            for workers in order:
                with serve(env, workers) as (base, server):
                    run_load(base, token, concurrency, concurrency * 10, f"w{workers}-warm")
                    blocks[workers].append(
                        _block(url, base, token, server, concurrency, requests, workers, round_no)
                    )
    figures = {str(n): _pooled(blocks[n]) for n in WORKERS}
    one = figures["1"]["throughput_per_s"]
    return {
        "concurrency": concurrency,
        "rounds": rounds,
        "requests_per_block": requests,
        "cpus": os.cpu_count(),
        "workers": figures,
        "ratios": {
            f"throughput_{n}_over_1": ratio(figures[str(n)]["throughput_per_s"], one)
            for n in WORKERS[1:]
        },
        "per_round_ratios": [
            {
                f"{n}_over_1": ratio(
                    blocks[n][r]["throughput_per_s"], blocks[1][r]["throughput_per_s"]
                )
                for n in WORKERS[1:]
            }
            for r in range(rounds)
        ],
    }


@contextmanager
def serve(env: dict[str, str], workers: int) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with served(
        lambda port: [str(ARVIS), "serve", "--workers", str(workers), "--port", str(port)],
        env,
        "scaling",
    ) as running:
        yield running


def _block(
    url: str,
    base: str,
    token: str,
    server: subprocess.Popen[bytes],
    concurrency: int,
    requests: int,
    workers: int,
    round_no: int,
) -> dict[str, Any]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        before = _snapshot(conn, server.pid)
        result = run_load(
            base, token, concurrency, requests, f"w{workers}-r{round_no}", samples=True
        )
        after = _snapshot(conn, server.pid)
    served = result["requests"] - result["errors"]
    machine = after["machine"] - before["machine"]
    wall = after["at"] - before["at"]  # brackets the load client's own start and end
    result.update(
        served=served,
        arvis_cpu_s=after["arvis"] - before["arvis"],
        postgres_cpu_s=_backend_cpu(before["backends"], after["backends"]),
        machine_busy=machine / (wall * (os.cpu_count() or 1)),
        commits=after["commits"] - before["commits"],
        database_bytes=after["database_bytes"] - before["database_bytes"],
    )
    return result


def _snapshot(conn: psycopg.Connection[Any], server_pid: int) -> dict[str, Any]:
    workers = psutil.Process(server_pid).children(recursive=True)
    arvis = sum(_cpu(p) for p in [psutil.Process(server_pid), *workers])
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    ).fetchall()
    backends = {pid: _cpu_of(pid) for (pid,) in rows}
    commits = conn.execute(
        "SELECT xact_commit, pg_database_size(current_database())"
        " FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    times = psutil.cpu_times()
    # guest time is already inside user time; idle and iowait are not work.
    busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))
    return {
        "arvis": arvis,
        "backends": backends,
        "commits": int(commits[0]) if commits else 0,
        "database_bytes": int(commits[1]) if commits else 0,
        "machine": busy,
        "at": time.perf_counter(),
    }


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _cpu_of(pid: int) -> float:
    try:
        return _cpu(psutil.Process(pid))
    except psutil.Error:
        return 0.0


def _backend_cpu(before: dict[int, float], after: dict[int, float]) -> float:
    # A backend that appeared during the block started from zero.
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _pooled(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for b in blocks for x in b.pop("latencies_s")]
    elapsed = sum(b["elapsed_s"] for b in blocks)
    served = sum(b["served"] for b in blocks)

    def per_syscall_ms(key: str) -> float:
        return round(sum(b[key] for b in blocks) * 1000 / served, 3) if served else 0.0

    return {
        "requests": len(latencies),
        "errors": sum(b["errors"] for b in blocks),
        "error_samples": [e for b in blocks for e in b["error_samples"]][:3],
        "throughput_per_s": round(served / elapsed, 1),
        "latency": summary_ms(latencies),
        "arvis_cpu_ms_per_syscall": per_syscall_ms("arvis_cpu_s"),
        "postgres_cpu_ms_per_syscall": per_syscall_ms("postgres_cpu_s"),
        "commits_per_syscall": round(sum(b["commits"] for b in blocks) / served, 2),
        "database_bytes_per_syscall": round(sum(b["database_bytes"] for b in blocks) / served),
        "machine_busy": round(statistics.fmean(b["machine_busy"] for b in blocks), 3),
        "blocks_throughput_per_s": [b["throughput_per_s"] for b in blocks],
    }


def wal_per_call(calls: int) -> dict[str, Any]:
    """WAL bytes and database growth per governed call (the in-process kernel, ``echo``),
    on an embedded cluster of its own, after a warm-up: nothing else writes there."""
    from arvis.store.embedded import start_embedded
    from arvis.store.migrate import upgrade
    from bench.kernel import open_kernel

    server = start_embedded(Path(tempfile.mkdtemp(prefix="arvis-bench-wal-")))
    try:
        with psycopg.connect(libpq_url(server.url), autocommit=True) as conn:
            conn.execute("CREATE DATABASE wal")
        url = make_url(server.url).set(database="wal").render_as_string(hide_password=False)
        upgrade(url)

        async def measure() -> dict[str, Any]:
            async with open_kernel(url, "wal") as kernel:
                for _ in range(200):
                    await kernel.syscall()
                with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                    conn.execute("CHECKPOINT")
                    before = _wal_and_size(conn)
                    for _ in range(calls):
                        await kernel.syscall()
                    after = _wal_and_size(conn)
            return {
                "calls": calls,
                "wal_bytes_per_call": round((after[0] - before[0]) / calls),
                "database_bytes_per_call": round((after[1] - before[1]) / calls),
            }

        return asyncio.run(measure())
    finally:
        server.stop()


def _wal_and_size(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    row = conn.execute(
        "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, pg_database_size(current_database())"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def render(result: dict[str, Any]) -> str:
    head = (
        f"8 scaling: c={result['concurrency']}, {result['rounds']} rounds x"
        f" {result['requests_per_block']} requests, {result['cpus']} CPUs"
    )
    lines = [head]
    for n, f in result["workers"].items():
        lat = f["latency"]
        lines.append(
            f"8 --workers {n}: {f['throughput_per_s']}/s (blocks {f['blocks_throughput_per_s']}),"
            f" p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms, errors {f['errors']};"
            f" CPU/syscall ARVIS {f['arvis_cpu_ms_per_syscall']} ms,"
            f" PostgreSQL {f['postgres_cpu_ms_per_syscall']} ms;"
            f" {f['commits_per_syscall']} commits and {f['database_bytes_per_syscall']} bytes of"
            f" database per syscall; machine {f['machine_busy']:.0%} busy"
        )
    for name, value in result["ratios"].items():
        lines.append(f"8 ratio {name}: {value}")
    if wal := result.get("wal"):
        lines.append(
            f"8 WAL per call (private cluster, {wal['calls']} calls after a checkpoint):"
            f" {wal['wal_bytes_per_call']} bytes; database growth {wal['database_bytes_per_call']}"
            " bytes"
        )
    return "\n".join(lines)


QUICK = {"rounds": 2, "requests": 600}
FULL = {"rounds": 5, "requests": 3000}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    from arvis.store.migrate import upgrade
    from bench.pg import choose_server

    sizes = QUICK if args.quick else FULL
    server = choose_server()
    try:
        url = server.create_database("scaling")
        upgrade(url)
        started = time.perf_counter()
        result = {
            "postgres": server.info(),
            **measure_scaling(url, concurrency=args.concurrency, **sizes),
            "wal": wal_per_call(500 if args.quick else 5000),
            "seconds": 0.0,
        }
        result["seconds"] = round(time.perf_counter() - started, 1)
    except HttpUnavailable as exc:
        raise SystemExit(f"bench.scaling: {exc}") from exc
    finally:
        server.close()
    out = Path(__file__).resolve().parent / "results" / "scaling.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()

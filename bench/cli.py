"""``python -m bench [--quick]``: every figure in one run, one table, one JSON file."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arvis.store.migrate import upgrade
from bench.floor import measure_floor
from bench.growth import measure_growth
from bench.httpbench import measure_http
from bench.kernel import measure_kernel
from bench.pg import Server, choose_server
from bench.profile import profile_kernel, round_trips
from bench.report import render

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Sizes:
    floor_pairs: int
    kernel_syscalls: int
    profile_syscalls: int
    dbos_sequential: int
    dbos_threaded: int
    http_requests: int
    memory_syscalls: int
    growth: tuple[int, ...]
    growth_samples: int
    replay_entries: int


FULL = Sizes(2000, 2000, 500, 1000, 4000, 500, 100_000, (0, 100_000, 1_000_000), 300, 10_000)
QUICK = Sizes(200, 200, 100, 100, 400, 30, 1000, (0, 10_000, 100_000), 60, 10_000)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI")
    parser.add_argument("--memory-syscalls", type=int, help="override N for the memory figure")
    parser.add_argument("--only", nargs="*", help="figures to run (default: all)")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    if args.memory_syscalls is not None:
        sizes = Sizes(**{**asdict(sizes), "memory_syscalls": args.memory_syscalls})
    results = run(sizes, "quick" if args.quick else "full", set(args.only or FIGURES))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    print(f"\nwritten: {RESULTS / 'latest.json'}")
    if results["failures"]:
        sys.exit(1)


FIGURES = ("floor", "kernel", "roundtrips", "profile", "peer", "http", "growth")


def run(sizes: Sizes, mode: str, only: set[str]) -> dict[str, Any]:
    server = choose_server()
    results: dict[str, Any] = {
        "mode": mode,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "sizes": asdict(sizes),
        "failures": {},
    }
    try:
        results["postgres"] = server.info()
        url = server.create_database("main")
        upgrade(url)
        steps: dict[str, Callable[[], Any]] = {
            "floor": lambda: measure_floor(url, sizes.floor_pairs),
            "kernel": lambda: asyncio.run(
                measure_kernel(url, sizes.kernel_syscalls, warmup=min(200, sizes.kernel_syscalls))
            ),
            "roundtrips": lambda: asyncio.run(round_trips(url)),
            "profile": lambda: asyncio.run(profile_kernel(url, sizes.profile_syscalls, RESULTS)),
            "peer": lambda: _dbos(server, sizes),
            "http": lambda: _http(server, sizes),
            "growth": lambda: _growth(server, sizes),
        }
        for name in FIGURES:
            if name in only:
                _step(results, name, steps[name])
    finally:
        server.close()
    results["ratios"] = _ratios(results)
    return results


def _step(results: dict[str, Any], name: str, measure: Callable[[], Any]) -> None:
    print(f"[bench] {name} …", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        results[name] = measure()
    except Exception as exc:
        results["failures"][name] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    print(f"[bench] {name} {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)


def _dbos(server: Server, sizes: Sizes) -> dict[str, Any]:
    try:
        import dbos  # noqa: F401
    except ImportError:
        return {
            "available": False,
            "why": "the dbos package is not installed (pip install .[bench])",
        }
    system_url = server.create_database("dbos")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.peer_dbos",
            system_url,
            str(sizes.dbos_sequential),
            str(sizes.dbos_threaded),
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd=RESULTS.parent.parent,
        env={**os.environ, "PYTHONPATH": str(RESULTS.parent.parent)},
    )
    if done.returncode != 0:
        return {"available": False, "why": f"DBOS did not run here: {done.stderr[-600:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _http(server: Server, sizes: Sizes) -> dict[str, Any]:
    url = server.create_database("http")
    upgrade(url)
    return measure_http(url, (1, 8, 32), sizes.http_requests, sizes.memory_syscalls)


def _growth(server: Server, sizes: Sizes) -> dict[str, Any]:
    url = server.create_database("growth")
    upgrade(url)
    return asyncio.run(
        measure_growth(url, sizes.growth, sizes.growth_samples, sizes.replay_entries)
    )


def _ratios(r: dict[str, Any]) -> dict[str, Any]:
    def get(*path: str) -> Any:
        node: Any = r
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def div(a: Any, b: Any) -> float | None:
        return round(a / b, 3) if a and b else None

    http32 = next((x for x in get("http", "load") or [] if x["concurrency"] == 32), None)
    kernel_p50 = get("kernel", "syscall", "p50_ms")
    growth = get("growth", "points") or []
    return {
        "kernel_p50_over_floor_p50": div(kernel_p50, get("floor", "pair", "p50_ms")),
        "kernel_p50_over_autocommit_floor_p50": div(
            kernel_p50, get("floor", "pair_autocommit", "p50_ms")
        ),
        "dbos_p50_over_kernel_p50": div(get("peer", "sequential", "p50_ms"), kernel_p50),
        "kernel_seq_throughput_over_dbos_8_threads": div(
            get("kernel", "throughput_per_s"), get("peer", "throughput_per_s")
        ),
        "http_c32_throughput_over_dbos_8_threads": div(
            http32 and http32["throughput_per_s"], get("peer", "throughput_per_s")
        ),
        "growth_largest_p50_over_empty_p50": growth[-1]["p50_vs_empty"] if growth else None,
        "kernel_client_cpu_over_dbos_client_cpu": div(
            get("kernel", "client_cpu_ms_per_syscall"), get("peer", "client_cpu_ms_per_workflow")
        ),
    }


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "load_average": os.getloadavg(),
    }

"""``python -m bench [--quick]``: every figure in one run, one table, one JSON file."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arvis.store.migrate import upgrade
from bench.cuts import measure_key_lookup, measure_statement_paths
from bench.evidence import measure_evidence
from bench.evidence import render as render_evidence
from bench.growth import measure_growth
from bench.httpbench import measure_http
from bench.httpprofile import measure_http_profile
from bench.httpside import measure_cpu_floor, measure_http_floor
from bench.httpside import render as render_httpside
from bench.peer_dbos import DbosPeer, PeerUnavailable
from bench.pg import Server, choose_server
from bench.policies import measure_policies
from bench.profile import profile_kernel, round_trips
from bench.report import render
from bench.scaling import FULL as SCALING_FULL
from bench.scaling import QUICK as SCALING_QUICK
from bench.scaling import measure_scaling
from bench.scaling import render as render_scaling
from bench.served import measure_served
from bench.served import render as render_served
from bench.sidebyside import measure_side_by_side
from bench.startup import measure_startup
from bench.startup import render as render_startup
from bench.writeset import measure_writeset

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
    rounds: int  # side-by-side blocks per figure (bench/sidebyside.py)


FULL = Sizes(
    2000, 2000, 500, 1000, 4000, 500, 100_000, (0, 100_000, 1_000_000), 600, 10_000, rounds=10
)
QUICK = Sizes(200, 200, 100, 100, 400, 30, 1000, (0, 10_000, 100_000), 80, 10_000, rounds=4)


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
    if "startup" in results:
        print(render_startup(results["startup"]))
    if "scaling" in results:
        print(render_scaling(results["scaling"]))
    if "evidence" in results:
        print(render_evidence(results["evidence"]))
    if "served" in results:
        print(render_served(results["served"]))
    if "httpfloor" in results:
        print(render_httpside(results["httpfloor"]))
    print(f"\nwritten: {RESULTS / 'latest.json'}")
    if results["failures"]:
        sys.exit(1)


FIGURES = (
    "sidebyside",
    "roundtrips",
    "profile",
    "writeset",
    "http",
    "httpfloor",
    "httpprofile",
    "cuts",
    "growth",
    "policies",
)
# Figures 8 and 9 (docs/deploy.md, docs/scaling.md) run only when named: --only startup scaling.
DEPLOY_FIGURES = ("startup", "scaling")
# Figure 11 (issue 19: checkpoints and the witness) and figure 12 (issue 23: what is served
# is verified, every entry witnessed) run only when named: --only evidence served.
OPT_IN_FIGURES = ("evidence", "served")
# The names of the separate figures 1-3, which now run together, still select them.
ALIASES = {"floor": "sidebyside", "kernel": "sidebyside", "peer": "sidebyside"}


def run(sizes: Sizes, mode: str, only: set[str]) -> dict[str, Any]:
    only = {ALIASES.get(name, name) for name in only}
    server = choose_server()
    results: dict[str, Any] = {
        "mode": mode,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "sizes": asdict(sizes),
        "failures": {},
    }
    peer: DbosPeer | None = None
    try:
        results["postgres"] = server.info()
        url = server.create_database("main")
        upgrade(url)
        if only & {"sidebyside", "http", "httpfloor"}:
            try:
                peer = DbosPeer(server.create_database("dbos"))
            except PeerUnavailable as exc:
                results["peer"] = {"available": False, "why": str(exc)}
        steps: dict[str, Callable[[], Any]] = {
            "sidebyside": lambda: asyncio.run(
                measure_side_by_side(
                    url,
                    peer,
                    rounds=sizes.rounds,
                    floor_pairs=sizes.floor_pairs,
                    kernel_syscalls=sizes.kernel_syscalls,
                    dbos_workflows=sizes.dbos_sequential,
                    warmup=min(200, sizes.kernel_syscalls),
                )
            ),
            "roundtrips": lambda: asyncio.run(round_trips(url)),
            "policies": lambda: asyncio.run(
                measure_policies(
                    url,
                    rounds=sizes.rounds,
                    syscalls=sizes.kernel_syscalls,
                    warmup=min(100, sizes.kernel_syscalls),
                )
            ),
            "profile": lambda: asyncio.run(profile_kernel(url, sizes.profile_syscalls, RESULTS)),
            "writeset": lambda: _writeset(server, sizes),
            "http": lambda: _http(server, sizes, peer),
            "httpfloor": lambda: _httpfloor(server, sizes, peer, mode),
            "httpprofile": lambda: _httpprofile(server, sizes),
            "cuts": lambda: {
                "key_lookup": asyncio.run(
                    measure_key_lookup(url, rounds=sizes.rounds, lookups=sizes.kernel_syscalls)
                ),
                "statement_paths": asyncio.run(
                    measure_statement_paths(
                        url, rounds=sizes.rounds, statements=sizes.kernel_syscalls
                    )
                ),
            },
            "growth": lambda: _growth(server, sizes),
            "startup": lambda: _startup(server, mode),
            "scaling": lambda: _scaling(server, mode),
            "evidence": lambda: asyncio.run(
                measure_evidence(
                    url,
                    rounds=sizes.rounds,
                    syscalls=sizes.kernel_syscalls,
                    warmup=min(100, sizes.kernel_syscalls),
                )
            ),
            "served": lambda: asyncio.run(
                measure_served(url, rounds=sizes.rounds, syscalls=sizes.kernel_syscalls)
            ),
        }
        for name in FIGURES + DEPLOY_FIGURES + OPT_IN_FIGURES:
            if name in only:
                _step(results, name, steps[name])
        if peer is not None and "http" not in only:
            _step(results, "peer_threaded", lambda: _threaded(peer, sizes))
    finally:
        if peer is not None:
            results["peer"] = _peer(results, peer)
            peer.close()
        server.close()
    _unfold(results)
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


def _writeset(server: Server, sizes: Sizes) -> dict[str, Any]:
    kernel_url = server.create_database("writeset")
    upgrade(kernel_url)
    return measure_writeset(
        kernel_url, server.create_database("writeset_floor"), sizes.kernel_syscalls
    )


def _threaded(peer: DbosPeer, sizes: Sizes, threads: int = 8) -> dict[str, Any]:
    elapsed = peer.threaded(sizes.dbos_threaded, threads)
    return {
        "threads": threads,
        "threaded_workflows": sizes.dbos_threaded,
        "throughput_per_s": round(sizes.dbos_threaded / elapsed, 1),
        "rounds": 1,
    }


def _peer(results: dict[str, Any], peer: DbosPeer) -> dict[str, Any]:
    """Figure 3 from its parts: sequential blocks (side by side with the kernel) and
    threaded blocks (side by side with HTTP at the highest concurrency)."""
    sequential = (results.get("sidebyside") or {}).get("peer_sequential")
    threaded = (results.get("http") or {}).pop("peer_threaded", None) or results.pop(
        "peer_threaded", None
    )
    if sequential is None and threaded is None:
        return {"available": False, "why": "its figures failed (see failures)"}
    return {"available": True, "version": peer.version, **(sequential or {}), **(threaded or {})}


def _unfold(results: dict[str, Any]) -> None:
    """Figures 1 and 2 under their own names, as the report and the JSON show them."""
    side = results.pop("sidebyside", None)
    if side:
        results["floor"] = side["floor"]
        results["kernel"] = side["kernel"]
        results["side_by_side"] = side["side_by_side"]
        results["statements"] = side["statements"]


def _http(server: Server, sizes: Sizes, peer: DbosPeer | None) -> dict[str, Any]:
    url = server.create_database("http")
    upgrade(url)
    return measure_http(
        url,
        (1, 8, 32),
        sizes.http_requests,
        sizes.memory_syscalls,
        peer=peer,
        rounds=sizes.rounds,
        dbos_workflows=sizes.dbos_threaded,
        floor_url=server.create_database("http_floor"),
    )


def _httpfloor(server: Server, sizes: Sizes, peer: DbosPeer | None, mode: str) -> dict[str, Any]:
    """Figure 17 (issue 25): ARVIS over HTTP beside the HTTP floor, and the in-process
    CPU of a governed call beside the same two INSERTs'."""
    url = server.create_database("httpside")
    upgrade(url)
    floor_url = server.create_database("httpside_floor")
    quick = mode == "quick"
    return {
        "http": measure_http_floor(
            url,
            floor_url,
            requests=sizes.http_requests,
            rounds=sizes.rounds,
            per_agent=3 if quick else 10,
            peer=peer,
            dbos_workflows=sizes.dbos_threaded,
            cost_requests=300 if quick else 2000,
            settle_s=1.0 if quick else 10.5,
        ),
        "cpu": asyncio.run(
            measure_cpu_floor(url, floor_url, rounds=sizes.rounds, calls=sizes.kernel_syscalls)
        ),
    }


def _httpprofile(server: Server, sizes: Sizes) -> dict[str, Any]:
    url = server.create_database("httpprofile")
    upgrade(url)
    return measure_http_profile(url, sizes.profile_syscalls, RESULTS)


def _startup(server: Server, mode: str) -> dict[str, Any]:
    url = server.create_database("startup")
    upgrade(url)
    return measure_startup(url, 3 if mode == "quick" else 10)


def _scaling(server: Server, mode: str) -> dict[str, Any]:
    url = server.create_database("scaling")
    upgrade(url)
    return measure_scaling(url, **(SCALING_QUICK if mode == "quick" else SCALING_FULL))


def _growth(server: Server, sizes: Sizes) -> dict[str, Any]:
    urls = {size: server.create_database(f"growth{size}") for size in sizes.growth}
    for url in urls.values():
        upgrade(url)
    return asyncio.run(
        measure_growth(urls, sizes.growth_samples, sizes.replay_entries, sizes.rounds)
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
    side = get("httpfloor", "http") or {}
    dbos8 = get("httpfloor", "http", "dbos", "threads_8")
    kernel_p50 = get("kernel", "syscall", "p50_ms")
    growth = get("growth", "points") or []
    return {
        "kernel_p50_over_floor_p50": div(kernel_p50, get("floor", "pair", "p50_ms")),
        "median_round_kernel_over_floor": get("side_by_side", "median_round_kernel_over_floor"),
        "statements_p50_over_floor_p50": div(
            get("statements", "pair", "p50_ms"), get("floor", "pair", "p50_ms")
        ),
        "kernel_p50_over_autocommit_floor_p50": div(
            kernel_p50, get("floor", "pair_autocommit", "p50_ms")
        ),
        "dbos_p50_over_kernel_p50": div(get("peer", "sequential", "p50_ms"), kernel_p50),
        "median_round_dbos_over_kernel": get("side_by_side", "median_round_dbos_over_kernel"),
        "kernel_seq_throughput_over_dbos_8_threads": div(
            get("kernel", "throughput_per_s"), get("peer", "throughput_per_s")
        ),
        "http_c32_throughput_over_dbos_8_threads": div(
            http32 and http32["throughput_per_s"], get("peer", "throughput_per_s")
        ),
        "http_c1_p50_over_floor_p50": get(
            "http", "sequential_beside_floor", "http_c1_p50_over_floor_p50"
        ),
        # Figure 17 (issue 25): ARVIS over HTTP beside the HTTP floor, in one run.
        "http_c1_p50_over_http_floor_p50": get(
            "httpfloor", "http", "median_round", "c1_p50_over_floor"
        ),
        "http_c32_throughput_over_http_floor_c32": get(
            "httpfloor", "http", "median_round", "c32_throughput_over_floor"
        ),
        "http_c32_throughput_over_dbos_8_threads_same_run": div(
            get("httpfloor", "http", "arvis", "c32", "throughput_per_s"), dbos8
        ),
        "http_server_cpu_per_call_over_http_floor_c1": div(
            get("httpfloor", "http", "arvis", "c1", "server_cpu_ms_per_call"),
            get("httpfloor", "http", "floor", "c1", "server_cpu_ms_per_call"),
        ),
        "kernel_cpu_per_call_over_async_floor_cpu": get(
            "httpfloor", "cpu", "kernel_cpu_over_floor_cpu"
        ),
        "commits_per_governed_call_c32": get(
            "httpfloor", "http", "database_cost_c32", "arvis", "commits_per_call"
        )
        if side
        else None,
        "growth_largest_p50_over_empty_p50": growth[-1]["p50_vs_empty"] if growth else None,
        "kernel_client_cpu_over_dbos_client_cpu": div(
            get("kernel", "client_cpu_ms_per_syscall"), get("peer", "client_cpu_ms_per_workflow")
        ),
        **{
            f"{name}_p50_over_rules_p50": div(
                get("policies", name, "syscall", "p50_ms"),
                get("policies", "rules", "syscall", "p50_ms"),
            )
            for name in ("cedar", "shadow", "budgets")
        },
        **{
            f"median_round_{name}_over_rules": get("policies", f"median_round_{name}_over_rules")
            for name in ("cedar", "shadow", "budgets")
        },
        # Client CPU is steadier than latency on a shared machine: what the engine costs.
        **{
            f"{name}_client_cpu_over_rules": div(
                get("policies", name, "client_cpu_ms_per_syscall"),
                get("policies", "rules", "client_cpu_ms_per_syscall"),
            )
            for name in ("cedar", "shadow", "budgets")
        },
    }


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "load_average": os.getloadavg(),
    }

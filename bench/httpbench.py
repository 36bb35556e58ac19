"""Figures 4 and 6: ``arvis serve --workers 2`` under load, and a worker's memory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg

from arvis.store.engine import libpq_url
from bench.floor import Floor
from bench.peer_dbos import DbosPeer
from bench.stats import percentile, ratio, summary_ms

ARVIS = Path(sys.executable).with_name("arvis")
ROOT = Path(__file__).resolve().parent.parent


# autovacuum's own default thresholds: a table is vacuumed past 50 + 20 % dead rows
# and analyzed past 50 + 10 % changed rows (PostgreSQL 15's defaults).
_DUE = """
    SELECT relname,
           n_dead_tup > 50 + 0.2 * greatest(n_live_tup, 0) AS vacuum,
           n_mod_since_analyze > 50 + 0.1 * greatest(n_live_tup, 0) AS analyze
      FROM pg_stat_user_tables
     WHERE relname = ANY(%s)
"""
_LIFECYCLE = ["attempts", "decisions", "runs", "journal_entries", "confirmations"]


@contextmanager
def vacuuming(url: str, every_s: float = 1.0) -> Iterator[None]:
    """Stand in for autovacuum when the server has it off (this machine's PostgreSQL 15
    does): every settle leaves a dead intent, and a long run without vacuum measures
    table bloat rather than ARVIS. Every ``every_s`` it vacuums and analyzes the
    lifecycle tables that the daemon, at its default thresholds, would. A no-op
    when autovacuum is on."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    if row is not None and row[0] == "on":
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            while not stop.wait(every_s):
                for table, vacuum, analyze in conn.execute(_DUE, (_LIFECYCLE,)).fetchall():
                    if vacuum:
                        conn.execute(f"VACUUM {'(ANALYZE) ' if analyze else ''}{table}")
                    elif analyze:
                        conn.execute(f"ANALYZE {table}")

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join(timeout=60)


class HttpUnavailable(RuntimeError):
    """The server or the key could not be had; the figure is reported as missing."""


def measure_http(
    url: str,
    concurrencies: tuple[int, ...],
    requests: int,
    memory_syscalls: int,
    *,
    peer: DbosPeer | None = None,
    rounds: int = 1,
    dbos_workflows: int = 0,
    threads: int = 8,
    floor_url: str | None = None,
) -> dict[str, Any]:
    """Load at each concurrency; the highest one runs in ``rounds`` blocks, each
    followed by a block of DBOS on ``threads`` threads, so the two throughputs
    are measured side by side (bench/sidebyside.py says why). With ``floor_url``,
    one sequential keep-alive client (c = 1) also runs in ``rounds`` blocks, each
    followed by a block of the floor's pairs on that database: the HTTP p50 beside
    the floor's, in one run."""
    env = {**os.environ, "ARVIS_DATABASE_URL": url, "ARVIS_LOG_LEVEL": "WARNING"}
    env["ARVIS_DATA_DIR"] = tempfile.mkdtemp(prefix="arvis-bench-data-")
    token, key_source = create_agent_key(env)
    *lower, top = concurrencies
    dbos_elapsed = 0.0
    with serve(env) as (base, server), vacuuming(url):
        run_load(base, token, 8, 400, "warm")
        rss_warm = worker_rss(server.pid)
        sequential = _sequential_beside_floor(base, token, requests, rounds, floor_url)
        load = [run_load(base, token, c, requests * max(1, c // 4), f"c{c}") for c in lower]
        blocks = []
        for block in range(rounds):
            # at least ten requests per agent, so a block is not mostly connecting
            per_block = max(requests * max(1, top // 4) // rounds, top * 10)
            blocks.append(run_load(base, token, top, per_block, f"c{top}-b{block}", samples=True))
            if peer is not None and dbos_workflows:
                dbos_elapsed += peer.threaded(dbos_workflows // rounds, threads)
        load.append(_pooled(blocks))
        mem_run = run_load(base, token, 32, memory_syscalls, "mem") if memory_syscalls else None
        rss_after = worker_rss(server.pid)
    result: dict[str, Any] = {
        "key_created_by": key_source,
        "workers": 2,
        "load": load,
        "memory": {
            "syscalls_after_warmup": mem_run["requests"] if mem_run else 0,
            "memory_run_errors": mem_run["errors"] if mem_run else 0,
            "worker_rss_mib_after_warmup": rss_warm,
            "worker_rss_mib_after_syscalls": rss_after,
        },
    }
    if sequential is not None:
        result["sequential_beside_floor"] = sequential
    if dbos_elapsed:
        result["peer_threaded"] = {
            "threads": threads,
            "threaded_workflows": dbos_workflows // rounds * rounds,
            "throughput_per_s": round(dbos_workflows // rounds * rounds / dbos_elapsed, 1),
            "rounds": rounds,
        }
    return result


def _sequential_beside_floor(
    base: str, token: str, requests: int, rounds: int, floor_url: str | None
) -> dict[str, Any] | None:
    if floor_url is None:
        return None
    per_block = max(requests // rounds, 50)
    latencies: list[float] = []
    pairs: list[float] = []
    per_round: list[float | None] = []
    with Floor(floor_url) as floor:
        floor.pairs("explicit", 50)
        for block in range(rounds):
            http = run_load(base, token, 1, per_block, f"seq-b{block}", samples=True)
            mine = floor.pairs("explicit", per_block)
            latencies += http["latencies_s"]
            pairs += mine
            per_round.append(ratio(percentile(http["latencies_s"], 50), percentile(mine, 50)))
    return {
        "http_c1": summary_ms(latencies),
        "floor_pair": summary_ms(pairs),
        "http_c1_p50_over_floor_p50": ratio(percentile(latencies, 50), percentile(pairs, 50)),
        "rounds_http_c1_over_floor": sorted(r for r in per_round if r is not None),
    }


def _pooled(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure from blocks of the same load: throughput over their summed time."""
    latencies = [x for b in blocks for x in b.pop("latencies_s")]
    elapsed = sum(b["elapsed_s"] for b in blocks)
    return {
        "concurrency": blocks[0]["concurrency"],
        "requests": len(latencies),
        "elapsed_s": elapsed,
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        "latency": summary_ms(latencies),
        "errors": sum(b["errors"] for b in blocks),
        "error_samples": [e for b in blocks for e in b["error_samples"]][:3],
        "blocks_throughput_per_s": [b["throughput_per_s"] for b in blocks],
    }


def create_agent_key(env: dict[str, str], tenant: str = "bench") -> tuple[str, str]:
    """``arvis keys create`` (the token is its last line)."""
    done = subprocess.run(
        [
            str(ARVIS),
            "keys",
            "create",
            "--tenant",
            tenant,
            "--principal",
            "bench",
            "--role",
            "agent",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise HttpUnavailable(f"arvis keys create failed ({done.returncode}): {done.stderr[-400:]}")
    return lines[-1].strip(), "arvis keys create"


@contextmanager
def serve(env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``arvis serve --workers 2`` on a free port: its base URL and process, once ready."""
    with served(
        lambda port: [
            str(ARVIS),
            "serve",
            "--workers",
            "2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env,
        "serve",
    ) as running:
        yield running


@contextmanager
def served(
    argv: Callable[[int], list[str]], env: dict[str, str], tag: str, cwd: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A server process (``argv`` for a free port) that answers ``/readyz`` on 127.0.0.1,
    its output in a log file; terminated (killed if need be) on exit."""
    port = _free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"arvis-bench-{tag}-", suffix=".log", delete=False)  # noqa: SIM115
    server = subprocess.Popen(argv(port), env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, server, Path(log.name))
        yield base, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def run_load(
    base: str, token: str, concurrency: int, requests: int, tag: str, *, samples: bool = False
) -> dict[str, Any]:
    """The load client in its own process, so its CPU is not the server's."""
    command = [sys.executable, "-m", "bench.loadgen", base, token, str(concurrency)]
    command += [str(requests), tag] + (["--samples"] if samples else [])
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise HttpUnavailable(f"load client failed: {done.stderr[-400:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def worker_rss(parent_pid: int) -> list[float]:
    """RSS in MiB of each uvicorn worker (the serve process's Python children)."""
    import psutil

    children = psutil.Process(parent_pid).children(recursive=True)
    workers = [c for c in children if any("spawn_main" in part for part in c.cmdline())]
    return sorted(round(c.memory_info().rss / 2**20, 1) for c in workers)


def _wait_ready(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise HttpUnavailable(f"arvis serve exited: {log.read_text()[-800:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise HttpUnavailable(f"arvis serve not ready after 60 s: {log.read_text()[-800:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

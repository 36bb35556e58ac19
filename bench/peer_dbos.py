"""Figure 3: DBOS Transact, a workflow with one no-op step, on the same server.

Runs in its own process (``python -m bench.peer_dbos SYSTEM_DB_URL SEQ TOTAL THREADS``)
because DBOS is a process-wide singleton with its own threads; prints one JSON
object. The system database is a fresh database of the bench run.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.stats import summary_ms


def run(system_url: str, sequential: int, total: int, threads: int) -> dict[str, Any]:
    from dbos import DBOS

    DBOS(
        config={
            "name": "arvis-bench",
            "system_database_url": system_url,
            "log_level": "WARNING",
            "enable_otlp": False,
        }
    )

    @DBOS.step()
    def noop() -> None:
        return None

    @DBOS.workflow()
    def one_step(i: int) -> int:
        noop()
        return i

    DBOS.launch()
    try:
        for i in range(50):
            one_step(i)
        samples = []
        cpu0 = time.process_time()
        for i in range(sequential):
            start = time.perf_counter()
            one_step(i)
            samples.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu0
        with ThreadPoolExecutor(threads) as pool:
            start = time.perf_counter()
            list(pool.map(one_step, range(total)))
            elapsed = time.perf_counter() - start
    finally:
        DBOS.destroy()
    import dbos

    return {
        "available": True,
        "version": getattr(dbos, "__version__", None) or _dist_version(),
        "sequential": summary_ms(samples),
        "client_cpu_ms_per_workflow": round(cpu / sequential * 1000, 4),
        "threads": threads,
        "threaded_workflows": total,
        "throughput_per_s": round(total / elapsed, 1),
    }


def _dist_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dbos")
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    url, seq, total, threads = sys.argv[1], *map(int, sys.argv[2:5])
    print(json.dumps(run(url, seq, total, threads)))

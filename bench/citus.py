"""Governed calls over HTTP on Citus beside plain PostgreSQL (issue 28, docs/scaling.md).

``python -m bench.citus [--quick]`` starts, from this machine's PostgreSQL 15 with Citus
installed, a coordinator and two workers on loopback (the test tier's cluster,
``tests/support/citus.py``) and one plain private PostgreSQL with the same settings
(fsync off on both: the figure is about the extra hop, not the disk). On each it
migrates a database (``--distribute`` on Citus), mints an agent key for each of two
tenants that Citus places on different workers, and serves it with ``arvis serve
--workers 2``. Then, in alternating blocks (bench/sidebyside.py says why), it posts
``tool.execute`` of ``echo``: sequentially (one keep-alive client per tenant, one after
the other) and at c = 32 (16 agents per tenant, both tenants at once). It prints one
JSON object and writes ``bench/results/citus.json``.

Dev-only: it uses the test tier's cluster, which is where a Citus on loopback is built.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arvis.store.migrate import distribute, upgrade
from bench.httpbench import create_agent_key, run_load, serve
from bench.stats import percentile, ratio
from tests.support.citus import citus_missing, start_citus_cluster, tenant_elsewhere
from tests.support.pgcluster import PG15_BIN, start_private_cluster
from tests.support.postgres import create_database

RESULTS = Path(__file__).resolve().parent / "results" / "citus.json"


def _block(base: str, tokens: list[str], concurrency: int, requests: int, tag: str) -> Any:
    """Both tenants' agents at once (``concurrency`` in all), or one after the other at 1."""
    if concurrency == 1:
        runs = [
            run_load(base, t, 1, requests, f"{tag}-{i}", samples=True) for i, t in enumerate(tokens)
        ]
        elapsed = sum(r["elapsed_s"] for r in runs)
    else:
        each = concurrency // len(tokens)
        with ThreadPoolExecutor(len(tokens)) as pool:
            futures = [
                pool.submit(
                    run_load, base, t, each, requests // len(tokens), f"{tag}-{i}", samples=True
                )
                for i, t in enumerate(tokens)
            ]
        runs = [f.result() for f in futures]
        elapsed = max(r["elapsed_s"] for r in runs)
    samples = [x for r in runs for x in r["latencies_s"]]
    return {
        "requests": len(samples),
        "throughput_per_s": round(len(samples) / elapsed, 1),
        "p50_ms": round(percentile(samples, 50) * 1000, 2),
        "p99_ms": round(percentile(samples, 99) * 1000, 2),
        "errors": sum(r["errors"] for r in runs),
    }


def main(quick: bool) -> dict[str, Any]:
    missing = citus_missing()
    if missing is not None:
        raise SystemExit(f"bench.citus: {missing}")
    rounds, sequential, loaded = (2, 150, 1000) if quick else (3, 400, 3000)
    cluster = start_citus_cluster()
    plain = start_private_cluster(PG15_BIN)
    try:
        urls = {
            "citus": cluster.create_database("arvis_bench"),
            "plain": create_database(plain.url),
        }
        for name, url in urls.items():
            upgrade(url)
            if name == "citus":
                distribute(url)
        tenants = ("bench-a", tenant_elsewhere(urls["citus"], "bench-a", prefix="bench"))
        envs, tokens = {}, {}
        for name, url in urls.items():
            envs[name] = {
                **os.environ,
                "ARVIS_DATABASE_URL": url,
                "ARVIS_LOG_LEVEL": "WARNING",
                "ARVIS_DATA_DIR": tempfile.mkdtemp(prefix=f"arvis-bench-{name}-"),
            }
            tokens[name] = [create_agent_key(envs[name], t)[0] for t in tenants]
        blocks: dict[str, dict[str, list[Any]]] = {n: {"c1": [], "c32": []} for n in urls}
        for block in range(rounds):
            for name in urls if block % 2 == 0 else reversed(list(urls)):
                with serve(envs[name]) as (base, _server):
                    run_load(base, tokens[name][0], 8, 200, f"warm{block}")
                    blocks[name]["c1"].append(
                        _block(base, tokens[name], 1, sequential, f"s{block}")
                    )
                    blocks[name]["c32"].append(_block(base, tokens[name], 32, loaded, f"l{block}"))
    finally:
        cluster.stop()
        plain.destroy()

    def pooled(name: str, c: str, field: str) -> float:
        return round(statistics.median(b[field] for b in blocks[name][c]), 2)

    result: dict[str, Any] = {"tenants": tenants, "rounds": rounds, "blocks": blocks}
    for c in ("c1", "c32"):
        result[c] = {
            name: {f: pooled(name, c, f) for f in ("throughput_per_s", "p50_ms", "p99_ms")}
            for name in urls
        }
        result[c]["citus_over_plain_p50"] = ratio(
            result[c]["citus"]["p50_ms"], result[c]["plain"]["p50_ms"]
        )
        result[c]["citus_over_plain_throughput"] = ratio(
            result[c]["citus"]["throughput_per_s"], result[c]["plain"]["throughput_per_s"]
        )
    result["errors"] = sum(b["errors"] for n in blocks.values() for c in n.values() for b in c)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(main("--quick" in sys.argv[1:]), indent=2))

"""A self-contained HTTP load client, run as its own process.

``python -m bench.loadgen BASE_URL TOKEN CONCURRENCY REQUESTS TAG`` prints one
JSON object: syscalls/s, latency percentiles and the error count. Each of the
CONCURRENCY workers is one agent: its own run, distinct causal ids, requests
back to back.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx

from bench.stats import summary_ms

RUN_LENGTH = 500


async def load(base: str, token: str, concurrency: int, requests: int, tag: str) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    per_worker = max(1, requests // concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=60) as http:

        async def agent(worker: int) -> None:
            for k in range(per_worker):
                body = {
                    "name": "tool.execute",
                    "run_id": f"{tag}-w{worker}-r{k // RUN_LENGTH}",
                    "causal_id": f"c-{k}",
                    "decision": {"tool": "echo", "payload": {"n": k, "text": "hello"}},
                }
                start = time.perf_counter()
                try:
                    response = await http.post("/v1/syscalls", json=body)
                    ok = (
                        response.status_code == 200 and response.json().get("outcome") == "executed"
                    )
                    if not ok:
                        errors.append(f"{response.status_code} {response.text[:200]}")
                except httpx.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append(time.perf_counter() - start)

        started = time.perf_counter()
        await asyncio.gather(*(agent(w) for w in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        "latency": summary_ms(latencies),
        "errors": len(errors),
        "error_samples": errors[:3],
    }


if __name__ == "__main__":
    base, token, c, n, tag = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
        sys.argv[5],
    )
    print(json.dumps(asyncio.run(load(base, token, c, n, tag))))

"""A self-contained HTTP load client, run as its own process.

``python -m bench.loadgen BASE_URL TOKEN CONCURRENCY REQUESTS TAG`` prints one
JSON object: syscalls/s, latency percentiles and the error count. Each of the
CONCURRENCY workers is one agent on its own keep-alive connection: its own run,
distinct causal ids, requests back to back.

The client speaks minimal HTTP/1.1 over asyncio streams rather than through a
full client library: on two cores shared with the server and PostgreSQL, the
load generator's own CPU must stay small, or it measures itself.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from bench.stats import summary_ms

RUN_LENGTH = 500


class Connection:
    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.head = (
            "POST /v1/syscalls HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            f"Authorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\n"
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        close = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            lowered = name.strip().lower()
            if lowered == b"content-length":
                length = int(value.strip())
            elif lowered == b"connection" and value.strip().lower() == b"close":
                close = True
        payload = await self.reader.readexactly(length)
        if close:
            self.writer.close()
            self.writer = None
        return status, payload


async def load(
    base: str, token: str, concurrency: int, requests: int, tag: str, samples: bool = False
) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    per_worker = max(1, requests // concurrency)
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    async def agent(worker: int) -> None:
        conn = Connection(host, port, token)
        for k in range(per_worker):
            body = json.dumps(
                {
                    "name": "tool.execute",
                    "run_id": f"{tag}-w{worker}-r{k // RUN_LENGTH}",
                    "causal_id": f"c-{k}",
                    "decision": {"tool": "echo", "payload": {"n": k, "text": "hello"}},
                }
            ).encode()
            start = time.perf_counter()
            try:
                status, payload = await conn.post(body)
                if status != 200 or b'"outcome":"executed"' not in payload:
                    errors.append(f"{status} {payload[:200]!r}")
            except (OSError, ConnectionError, ValueError, asyncio.IncompleteReadError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                conn.writer = None
            latencies.append(time.perf_counter() - start)
        if conn.writer is not None:
            conn.writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(agent(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - started
    result = {
        "concurrency": concurrency,
        "requests": len(latencies),
        "elapsed_s": elapsed,
        "throughput_per_s": round(len(latencies) / elapsed, 1),
        "latency": summary_ms(latencies),
        "errors": len(errors),
        "error_samples": errors[:3],
        "cpu_s": time.process_time(),  # the load client's own CPU, start-up included
    }
    if samples:  # for pooling blocks of one figure (bench/httpbench.py)
        result["latencies_s"] = [round(x, 6) for x in latencies]
    return result


if __name__ == "__main__":
    base, token, c, n, tag = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
        sys.argv[5],
    )
    print(json.dumps(asyncio.run(load(base, token, c, n, tag, "--samples" in sys.argv[6:]))))

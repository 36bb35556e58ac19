"""Where a governed call's CPU goes over HTTP: a pyinstrument profile of one serve worker.

``arvis serve``'s own uvicorn configuration with one worker, in a process of its own
(``python -m bench.httpprofile OUT_DIR PORT``, ``ARVIS_DATABASE_URL`` in its
environment), under pyinstrument from the first ``SIGUSR1`` to the ``SIGUSR2`` that
writes the profile: the parent warms it, starts the profiler, drives sequential
keep-alive requests with the load client of every HTTP figure, and stops it. The
summary by library is the in-process profile's (bench/profile.py), with the HTTP
stack's own rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.httpbench import _free_port as free_port
from bench.httpbench import _wait_ready as wait_ready
from bench.httpbench import create_agent_key, run_load
from bench.httpside import serve_cpu_s as cpu_s
from bench.profile import CATEGORIES, by_library, profile_text

ROOT = Path(__file__).resolve().parent.parent


def measure_http_profile(url: str, requests: int, out_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "ARVIS_DATABASE_URL": url, "ARVIS_LOG_LEVEL": "WARNING"}
    env["ARVIS_DATA_DIR"] = tempfile.mkdtemp(prefix="arvis-bench-data-")
    token, _ = create_agent_key(env)
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="arvis-bench-prof-", suffix=".log", delete=False)  # noqa: SIM115
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.httpprofile", str(out_dir), str(port)],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    summary = out_dir / "http-profile.json"
    summary.unlink(missing_ok=True)
    try:
        wait_ready(base, server, Path(log.name))
        run_load(base, token, 1, 200, "prof-warm")
        cpu0 = cpu_s(server.pid)
        plain = run_load(base, token, 1, requests, "prof-plain")
        cpu_ms = (cpu_s(server.pid) - cpu0) / plain["requests"] * 1000
        server.send_signal(signal.SIGUSR1)
        profiled = run_load(base, token, 1, requests, "prof")
        server.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while not summary.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no profile written: {Path(log.name).read_text()[-800:]}")
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    shares: dict[str, float] = json.loads(summary.read_text())
    # The worker's idle loop is wall time, not CPU: the CPU is split over the rest.
    busy = {name: share for name, share in shares.items() if name != CATEGORIES[0][0]}
    whole = sum(busy.values()) or 1.0
    return {
        "requests": requests,
        "unprofiled_p50_ms": plain["latency"]["p50_ms"],
        "profiled_p50_ms": profiled["latency"]["p50_ms"],
        "worker_cpu_ms_per_request": round(cpu_ms, 4),
        "share_percent_by_library": shares,
        "estimated_cpu_ms_per_request_by_library": {
            name: round(share / whole * cpu_ms, 3) for name, share in busy.items()
        },
        "files": ["bench/results/http-profile.txt", "bench/results/http-profile.html"],
    }


def _serve(out_dir: Path, port: int) -> None:
    import uvicorn
    from pyinstrument import Profiler

    from arvis.config import load_settings
    from arvis.serving.server import ConnectionLimits, ServerConfig

    settings = load_settings()
    config = ServerConfig(
        "arvis.serving.app:create_served_app",
        limits=ConnectionLimits.from_settings(settings),
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=1,
        log_level="warning",
        access_log=False,
    )
    profiler = Profiler(interval=0.0002, async_mode="disabled")

    def start(*_: Any) -> None:
        profiler.start()

    def stop(*_: Any) -> None:
        profiler.stop()
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "http-profile.txt").write_text(profile_text(profiler))
        (out_dir / "http-profile.html").write_text(profiler.output_html())
        shares = by_library(profiler.last_session.root_frame())  # type: ignore[union-attr]
        (out_dir / "http-profile.json").write_text(json.dumps(shares))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    uvicorn.Server(config).run()


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), int(sys.argv[2]))

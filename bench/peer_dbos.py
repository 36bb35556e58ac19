"""Figure 3: DBOS Transact, a workflow with one no-op step, on the same server.

DBOS is a process-wide singleton with its own threads, so it runs in its own
process (``python -m bench.peer_dbos SYSTEM_DB_URL``), launched once and driven
over stdin/stdout one JSON line at a time, so its blocks can alternate with
ARVIS's in one run (bench/sidebyside.py):

    {"sequential": N}            -> {"samples": [seconds, ...], "cpu_s": ...}
    {"threaded": N, "threads": T} -> {"elapsed_s": ...}
    {"quit": true}

It first answers ``{"ready": true, "version": ...}`` after launch and warm-up.
The system database is a fresh database of the bench run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class PeerUnavailable(RuntimeError):
    """DBOS is not installed or did not start; the figure says NOT RUN with this text."""


class DbosPeer:
    """The parent's handle on the DBOS process."""

    def __init__(self, system_url: str) -> None:
        try:
            import dbos  # noqa: F401
        except ImportError:
            raise PeerUnavailable(
                "the dbos package is not installed (pip install .[bench])"
            ) from None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.peer_dbos", system_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        hello = self._read()
        self.version = hello.get("version")

    def sequential(self, count: int) -> tuple[list[float], float]:
        """``count`` workflows one after another: per-workflow seconds and CPU seconds."""
        answer = self._ask({"sequential": count})
        return answer["samples"], answer["cpu_s"]

    def threaded(self, count: int, threads: int) -> float:
        """Seconds for ``count`` workflows on ``threads`` threads."""
        return float(self._ask({"threaded": count, "threads": threads})["elapsed_s"])

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self._send({"quit": True})
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def _ask(self, command: dict[str, Any]) -> dict[str, Any]:
        self._send(command)
        return self._read()

    def _send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            assert self.process.stderr is not None
            self.process.wait(timeout=30)
            raise PeerUnavailable(f"DBOS did not run here: {self.process.stderr.read()[-600:]}")
        answer: dict[str, Any] = json.loads(line)
        return answer


def serve(system_url: str) -> None:
    """The DBOS process: launch, warm up, then answer commands until quit."""
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
    counter = 0
    try:
        for _ in range(50):
            one_step(counter)
            counter += 1
        _answer({"ready": True, "version": _version()})
        for line in sys.stdin:
            command = json.loads(line)
            if command.get("quit"):
                break
            if "sequential" in command:
                samples = []
                cpu0 = time.process_time()
                for _ in range(command["sequential"]):
                    start = time.perf_counter()
                    one_step(counter)
                    samples.append(time.perf_counter() - start)
                    counter += 1
                _answer({"samples": samples, "cpu_s": time.process_time() - cpu0})
            elif "threaded" in command:
                first, counter = counter, counter + command["threaded"]
                with ThreadPoolExecutor(command["threads"]) as pool:
                    start = time.perf_counter()
                    list(pool.map(one_step, range(first, counter)))
                    _answer({"elapsed_s": time.perf_counter() - start})
    finally:
        DBOS.destroy()


def _answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dbos")
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    serve(sys.argv[1])

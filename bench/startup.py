"""Figure 7: what one instance per turn costs, from process start to the first answer.

``python -m bench.startup [--runs N]`` (or ``python -m bench --only startup``) spawns
``arvis serve-turn RUN --port 0`` N times and times, from just before the spawn: its
ready line, the answer to one ``tool.execute`` of ``echo``, and its exit after SIGTERM.
Against the outside server (the bench's PostgreSQL) and on the embedded one, both warm
(the server already running, as beside ``arvis serve``) and cold (each process starts
the server and stops it at exit). Then where the time goes: the interpreter alone, the
imports, and each step of start-up timed inside a fresh process (``--phases``), with the
heaviest imports from ``python -X importtime``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Nothing of ARVIS or its dependencies at module level: ``--phases`` times those imports.
from bench.stats import summary_ms

ARVIS = Path(sys.executable).with_name("arvis")

SERVER_IMPORTS = "import arvis.cli.app, arvis.cli.serveturn, arvis.serving.app, uvicorn"
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def measure_startup(url: str, runs: int) -> dict[str, Any]:
    """Every figure of the start-up cost; ``url`` is a migrated database on the outside server."""
    from bench.httpbench import create_agent_key

    env = _env(url, Path(tempfile.mkdtemp(prefix="arvis-bench-turn-")))
    token, _ = create_agent_key(env)
    result: dict[str, Any] = {"runs": runs, "outside": _turns(env, token, runs)}
    result["phases"] = _phases(env, runs)
    result["interpreter_s"] = _median_run([sys.executable, "-c", "pass"], env, runs)
    result["imports_s"] = _median_run([sys.executable, "-c", SERVER_IMPORTS], env, runs)
    result["heaviest_imports"] = heaviest_imports(env)
    result["embedded"] = _embedded(runs)
    return result


def _env(url: str | None, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARVIS_")}
    env.update(ARVIS_DATA_DIR=str(data_dir), ARVIS_LOG_LEVEL="WARNING")
    if url is not None:
        env["ARVIS_DATABASE_URL"] = url
    return env


def _turns(env: dict[str, str], token: str, runs: int) -> dict[str, Any]:
    samples = [one_turn(env, token, f"startup-{time.time_ns()}") for _ in range(runs)]
    return {
        key: summary_ms([s[key] for s in samples])
        for key in ("ready_s", "first_answer_s", "stopped_s")
    }


def one_turn(env: dict[str, str], token: str, run: str) -> dict[str, float]:
    """One per-turn process: seconds from spawn to ready, to the first answer, to exit."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(ARVIS), "serve-turn", run, "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], 120)
        line = process.stdout.readline() if readable else b""
        if not line:
            raise RuntimeError(f"serve-turn gave no ready line (exit {process.poll()})")
        ready = time.perf_counter()
        port = int(json.loads(line)["port"])
        _post_echo(port, token, run)
        answered = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        if process.wait(timeout=60) != 0:
            raise RuntimeError(f"serve-turn exited {process.returncode}")
        stopped = time.perf_counter()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {
        "ready_s": ready - started,
        "first_answer_s": answered - started,
        "stopped_s": stopped - answered,
    }


def _post_echo(port: int, token: str, run: str) -> None:
    body = json.dumps(
        {
            "name": "tool.execute",
            "run_id": run,
            "causal_id": "first",
            "decision": {"tool": "echo", "payload": {"hello": "turn"}},
        }
    )
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request("POST", "/v1/syscalls", body, headers)
        response = conn.getresponse()
        payload = response.read()
    finally:
        conn.close()
    if response.status != 200 or b'"executed"' not in payload:
        raise RuntimeError(f"first syscall answered {response.status}: {payload[:200]!r}")


def _median_run(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 4)


def heaviest_imports(env: dict[str, str], top: int = 10) -> list[dict[str, Any]]:
    """Import time of the per-turn process by top-level package: the modules' own time
    (``python -X importtime``'s self column), summed per package, heaviest first."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", SERVER_IMPORTS],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    totals: dict[str, int] = {}
    for line in done.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match:
            name = match.group(4).split(".")[0]
            totals[name] = totals.get(name, 0) + int(match.group(1))
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return [{"package": name, "ms": round(us / 1000, 1)} for name, us in ranked]


def _phases(env: dict[str, str], runs: int) -> dict[str, float]:
    """Median seconds of each start-up step, timed inside fresh processes."""
    samples: list[dict[str, float]] = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-m", "bench.startup", "--phases"],
            env={**env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        samples.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {key: round(statistics.median(s[key] for s in samples), 4) for key in samples[0]}


def _embedded(runs: int) -> dict[str, Any]:
    """The same turns on the embedded PostgreSQL: cold (each process starts it) and warm."""
    from arvis.store.embedded import start_embedded
    from bench.httpbench import create_agent_key

    data_dir = Path(tempfile.mkdtemp(prefix="arvis-bench-embedded-"))
    env = _env(None, data_dir)
    started = time.perf_counter()
    subprocess.run([str(ARVIS), "migrate"], env=env, check=True, capture_output=True, timeout=600)
    first_start_s = time.perf_counter() - started  # initdb + start + migrate + stop
    token, _ = create_agent_key(env)
    cold = _turns(env, token, runs)
    # Held by this process, the server outlives each turn: as beside `arvis serve`.
    server = start_embedded(data_dir)
    try:
        warm = _turns(env, token, runs)
    finally:
        server.stop()
    return {"first_migrate_s": round(first_start_s, 3), "cold": cold, "warm": warm}


async def _time_phases() -> dict[str, float]:
    """Each step of ``arvis serve-turn`` start-up, in this fresh interpreter."""
    clock = time.perf_counter
    marks = [("start", clock())]
    import arvis.cli.app  # the command's imports

    marks.append(("cli_imports_s", clock()))
    import uvicorn  # noqa: F401

    import arvis.serving.app  # noqa: F401
    from arvis.bootstrap import build_kernel
    from arvis.cli import serveturn
    from arvis.config import load_settings

    marks.append(("server_imports_s", clock()))
    settings = load_settings().model_copy(update={"turn_run_id": "phases"})
    kernel = await build_kernel(settings)
    marks.append(("build_kernel_s", clock()))
    await kernel.start()
    marks.append(("lease_and_sweep_s", clock()))
    listener = serveturn._listen("127.0.0.1", 0)
    server = serveturn._server(kernel, lambda: None)
    server.config.load()
    server.lifespan = server.config.lifespan_class(server.config)
    await server.startup(sockets=[listener])
    marks.append(("http_listening_s", clock()))
    await server.shutdown()
    await kernel.close()
    return {name: at - marks[n][1] for n, (name, at) in enumerate(marks[1:])}


def render(result: dict[str, Any]) -> str:
    def lat(s: dict[str, Any]) -> str:
        return f"p50 {s['p50_ms'] / 1000:.2f} s, p90 {s['p90_ms'] / 1000:.2f} s"

    rows = [("7 startup (runs)", str(result["runs"]))]
    for where, turns in (
        ("outside PostgreSQL", result["outside"]),
        ("embedded, warm", result["embedded"]["warm"]),
        ("embedded, cold", result["embedded"]["cold"]),
    ):
        rows.append((f"7 {where}: ready", lat(turns["ready_s"])))
        rows.append((f"7 {where}: first answer", lat(turns["first_answer_s"])))
        rows.append((f"7 {where}: SIGTERM to exit", lat(turns["stopped_s"])))
    first = result["embedded"]["first_migrate_s"]
    rows.append(("7 embedded: first migrate (initdb)", f"{first} s"))
    rows.append(("7 python -c pass", f"{result['interpreter_s']:.3f} s"))
    rows.append(("7 imports of serve-turn", f"{result['imports_s']:.3f} s"))
    for name, seconds in result["phases"].items():
        rows.append((f"7 phase {name}", f"{seconds:.3f} s"))
    heavy = ", ".join(f"{i['package']} {i['ms']:.0f}" for i in result["heaviest_imports"][:8])
    rows.append(("7 heaviest imports (ms)", heavy))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)} | {value}" for name, value in rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phases:
        print(json.dumps(asyncio.run(_time_phases())))
        return
    from arvis.store.migrate import upgrade
    from bench.pg import choose_server

    server = choose_server()
    try:
        url = server.create_database("startup")
        upgrade(url)
        result = {"postgres": server.info(), **measure_startup(url, args.runs)}
    finally:
        server.close()
    out = Path(__file__).resolve().parent / "results" / "startup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()

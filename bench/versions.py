"""Two versions of ARVIS side by side: the governed call of each, in alternating blocks.

``python -m bench.versions BASE`` measures this checkout's kernel (in process, as figure 2
does: ``bench.kernel``) against the kernel of the checkout at ``BASE`` (a worktree of the
commit before a change, say: ``git worktree add --detach ../base <rev>``). Each block runs
in a fresh process of that side's own code, on the same PostgreSQL, the two sides taking
turns, so the drift of a noisy machine falls on both alike. Each side has its own database,
migrated by its own code (the schemas of two versions may differ). It prints each round's
p50 and client CPU per call of both sides and their ratio, and the medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.pg import choose_server

HERE = Path(__file__).resolve().parents[1]

MIGRATE = "import sys; from arvis.store.migrate import upgrade; upgrade(sys.argv[1])"

BLOCK = """
import asyncio, json, sys, time
from bench.kernel import open_kernel

async def block(url, prefix, count, warmup):
    async with open_kernel(url, prefix) as kernel:
        await kernel.timed(warmup)
        cpu = time.process_time()
        samples = sorted(await kernel.timed(count))
        cpu = time.process_time() - cpu
    print(json.dumps({"p50_ms": samples[len(samples) // 2] * 1000, "cpu_ms": cpu / count * 1000}))

asyncio.run(block(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def _run(checkout: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def compare(base: Path, *, rounds: int, count: int, warmup: int) -> dict[str, Any]:
    server = choose_server()
    sides = {"base": base.resolve(), "head": HERE}
    try:
        urls = {name: server.create_database(f"versions_{name}") for name in sides}
        for name, checkout in sides.items():
            _run(checkout, MIGRATE, urls[name])
        per_round: list[dict[str, float]] = []
        for number in range(rounds):
            # Alternate which side goes first, so neither always runs on a warmer machine.
            order = ["base", "head"] if number % 2 == 0 else ["head", "base"]
            answers = {
                name: json.loads(
                    _run(sides[name], BLOCK, urls[name], f"r{number}", str(count), str(warmup))
                )
                for name in order
            }
            row = {
                "base_p50_ms": round(answers["base"]["p50_ms"], 4),
                "head_p50_ms": round(answers["head"]["p50_ms"], 4),
                "base_cpu_ms": round(answers["base"]["cpu_ms"], 4),
                "head_cpu_ms": round(answers["head"]["cpu_ms"], 4),
            }
            row["head_over_base_p50"] = round(row["head_p50_ms"] / row["base_p50_ms"], 3)
            row["head_over_base_cpu"] = round(row["head_cpu_ms"] / row["base_cpu_ms"], 3)
            per_round.append(row)
            print(json.dumps(row), flush=True)
        return {
            "base": str(sides["base"]),
            "rounds": per_round,
            "median": {
                key: round(statistics.median(row[key] for row in per_round), 4)
                for key in per_round[0]
            },
        }
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the checkout to measure this one against")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--syscalls", type=int, default=400, help="governed calls per block")
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    result = compare(args.base, rounds=args.rounds, count=args.syscalls, warmup=args.warmup)
    print(json.dumps(result["median"], indent=2))


if __name__ == "__main__":
    main()

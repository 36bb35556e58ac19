"""Figure 11: what signed checkpoints and the file witness cost a governed call.

The echo syscall of figure 2 through four kernels on one database, in alternating
blocks (bench/sidebyside.py says why): no evidence; checkpoints every 10 entries
(a 10x denser setting than the default 100, so the cost shows); the file witness
(one fsynced line before every admission); and both. The ratios are each variant's
p50 over the plain kernel's, per block, and their median.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arvis.evidence.keys import SigningKey
from arvis.evidence.witness import FileWitness
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.evidence.checkpoints import Checkpointer, CheckpointPolicy
from arvis.store.checkpoints import PgCheckpoints
from bench.kernel import Kernel, open_kernel
from bench.stats import percentile, ratio, summary_ms

VARIANTS = ("plain", "checkpoint", "witness", "both")
EVERY = 10


def _witness() -> FileWitness:
    directory = Path(tempfile.mkdtemp(prefix="arvis-bench-witness-"))
    return FileWitness(directory / "witness.jsonl", max_bytes=64 * 1024 * 1024)


def _checkpoint(kernel: Kernel, witness: FileWitness | None) -> Checkpointer:
    checkpointer = Checkpointer(
        SigningKey(Ed25519PrivateKey.generate()),
        PgCheckpoints(kernel.store.engine),
        SystemClock(),
        CheckpointPolicy(every=EVERY, idle_s=0),
        journal=kernel.store.ops,
        witness=witness,
    )
    kernel.store.ops.append_observers.append(checkpointer.note)
    return checkpointer


async def measure_evidence(url: str, *, rounds: int, syscalls: int, warmup: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    per_round: list[dict[str, float | None]] = []
    checkpointers: list[Checkpointer] = []
    async with AsyncExitStack() as stack:
        kernels: dict[str, Kernel] = {}
        for name in VARIANTS:
            witness = _witness() if name in ("witness", "both") else None
            kernel = await stack.enter_async_context(
                open_kernel(url, f"evidence-{name}", witness=witness)
            )
            if name in ("checkpoint", "both"):
                checkpointers.append(_checkpoint(kernel, witness))
            kernels[name] = kernel
        for kernel in kernels.values():
            await kernel.timed(warmup)
        for _ in range(rounds):
            block: dict[str, list[float]] = {}
            for name in VARIANTS:
                block[name] = await kernels[name].timed(syscalls // rounds)
                samples[name] += block[name]
            plain_p50 = percentile(block["plain"], 50)
            per_round.append(
                {
                    f"{name}_over_plain": ratio(percentile(block[name], 50), plain_p50)
                    for name in VARIANTS[1:]
                }
            )
        start = time.perf_counter()
        for checkpointer in checkpointers:
            await checkpointer.flush()
        flush_s = time.perf_counter() - start
    result: dict[str, Any] = {name: {"syscall": summary_ms(samples[name])} for name in VARIANTS}
    result["checkpoint_every"] = EVERY
    result["final_flush_ms"] = round(flush_s * 1000, 2)
    result["rounds"] = per_round
    for name in VARIANTS[1:]:
        values = [v for r in per_round if (v := r[f"{name}_over_plain"]) is not None]
        result[f"median_round_{name}_over_plain"] = (
            round(statistics.median(values), 3) if values else None
        )
    return result


def render(figure: dict[str, Any]) -> str:
    lines = [
        "",
        f"Figure 11: evidence on a governed call (checkpoint every {figure['checkpoint_every']},"
        " file witness fsync per admission), side by side",
        f"{'variant':<12} {'p50 ms':>8} {'p99 ms':>8} {'p50 / plain':>12}",
    ]
    for name in VARIANTS:
        s = figure[name]["syscall"]
        over = "1.000" if name == "plain" else f"{figure[f'median_round_{name}_over_plain']}"
        lines.append(f"{name:<12} {s['p50_ms']:>8} {s['p99_ms']:>8} {over:>12}")
    return "\n".join(lines)

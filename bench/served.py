"""Figure 12: what verifying what is served, and witnessing every entry, cost (issue 23).

Three measurements, each side by side with the code before it, in alternating blocks
on one database (bench/sidebyside.py says why):

- a deduplicated answer (the same decision posted again): before (nothing checked,
  the old path), the entry's own hash recomputed, and — with the deployment's key —
  the link to the signed checkpoint that covers it, for an entry 100 positions before
  its checkpoint (``every = 100``: the most a dedupe reads; "cold" reads them every time,
  the default remembers a window it checked and recomputes only the entry) and for one
  after the last checkpoint (a lookup that finds none);
- a governed call with the file witness: intents only (before) and intents plus each
  appended entry (the feed, one write and fsync per batch), sequential and with 16
  calls at once, with the entries each fsync carried;
- a replay of a 1,000-entry run: the chain walk alone (before), the one verification
  without key or witness (the chain plus each entry against its intent), and with the
  key and the file witness.

The statements of the governed call are counted on the wire with the witness on: two,
as before; a deduplicated answer's round trips too, before and after.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arvis.domain.ids import RunId, TenantId
from arvis.evidence.keys import SigningKey
from arvis.evidence.witness import FileWitness
from arvis.lifecycle import journal
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.evidence.checkpoints import Checkpointer, CheckpointPolicy
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.ports import LifecycleReads
from arvis.lifecycle.records import JournalEntry, RunRecord
from arvis.lifecycle.request import Syscall
from arvis.store.checkpoints import PgCheckpoints
from bench.kernel import IDENTITY, TENANT, BenchFailure, Kernel, open_kernel
from bench.roundtrips import WireTrace
from bench.stats import percentile, ratio, summary_ms

EVERY = 100
DEDUPE_RUN = "served-dedupe"
DEDUPE_ENTRIES = 250  # checkpoints at 100 and 200; 201-250 after the last one
REPLAY_RUN = "served-replay"
REPLAY_ENTRIES = 1000
CONCURRENCY = 16


class _Unchecked:
    """The code before: a deduplicated answer served whatever the store held."""

    async def check_served(
        self, reads: LifecycleReads, run: RunRecord, entries: Sequence[JournalEntry]
    ) -> None:
        return None


def _witness(prefix: str) -> FileWitness:
    directory = Path(tempfile.mkdtemp(prefix=f"arvis-bench-{prefix}-"))
    return FileWitness(directory / "witness.jsonl", max_bytes=64 * 1024 * 1024)


def _echo(run: str, n: int) -> Syscall:
    return Syscall(
        name="tool.execute",
        run_id=run,
        causal_id=f"c-{n}",
        decision={"tool": "echo", "payload": {"n": n, "text": "hello"}},  # type: ignore[arg-type]
    )


async def _fill(kernel: Kernel, run: str, entries: int) -> None:
    for n in range(entries):
        result = await kernel.lifecycle.handler.handle(_echo(run, n), IDENTITY)
        if result.outcome != "executed":
            raise BenchFailure(f"{run} {n}: {result.outcome}")


async def _signed(kernel: Kernel, run: str, checkpoints: int) -> None:
    """Wait for the background signing of ``checkpoints`` heads (no flush: the tail
    after the last one stays unsigned)."""
    for _ in range(1000):
        async with kernel.store.ops.reading() as reads:
            if len(await reads.checkpoints(TenantId(TENANT), RunId(run))) >= checkpoints:
                return
        await asyncio.sleep(0.01)
    raise BenchFailure(f"the checkpoints of {run} were not signed")


class _Cold(EvidenceService):
    """Forgets the windows it checked: every answer reads back to its checkpoint."""

    async def check_served(
        self, reads: LifecycleReads, run: RunRecord, entries: Sequence[JournalEntry]
    ) -> None:
        self._covered.clear()
        await super().check_served(reads, run, entries)


async def _dedupe(kernel: Kernel, n: int, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        result = await kernel.lifecycle.handler.handle(_echo(DEDUPE_RUN, n), IDENTITY)
        samples.append(time.perf_counter() - start)
        if result.outcome != "deduplicated":
            raise BenchFailure(f"dedupe of c-{n}: {result.outcome} {result.reason}")
    return samples


async def _measure_dedupe(url: str, rounds: int, count: int) -> dict[str, Any]:
    key = SigningKey(Ed25519PrivateKey.generate())
    async with open_kernel(url, "served-dedupe") as kernel:
        checkpointer = Checkpointer(
            key,
            PgCheckpoints(kernel.store.engine),
            SystemClock(),
            CheckpointPolicy(every=EVERY, idle_s=0),
            journal=kernel.store.ops,
        )
        kernel.store.ops.append_observers.append(checkpointer.note)
        await _fill(kernel, DEDUPE_RUN, DEDUPE_ENTRIES)
        kernel.store.ops.append_observers.remove(checkpointer.note)
        await _signed(kernel, DEDUPE_RUN, DEDUPE_ENTRIES // EVERY)
        admission = kernel.lifecycle.handler.admission
        store, clock = kernel.store.ops, SystemClock()
        flags = PgCheckpoints(kernel.store.engine)
        variants: dict[str, tuple[Any, int]] = {
            "before": (_Unchecked(), 0),
            "own_hash": (EvidenceService(store, clock, flags=flags), 0),
            "covered_100_back_cold": (_Cold(store, clock, key=key.public, flags=flags), 0),
            "covered_100_back": (EvidenceService(store, clock, key=key.public, flags=flags), 0),
            "after_last_checkpoint": (
                EvidenceService(store, clock, key=key.public, flags=flags),
                DEDUPE_ENTRIES - 1,
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        per_round: list[dict[str, float | None]] = []
        for evidence, n in variants.values():  # warm-up
            admission.evidence = evidence
            await _dedupe(kernel, n, 20)
        for _ in range(rounds):
            block: dict[str, list[float]] = {}
            for name, (evidence, n) in variants.items():
                admission.evidence = evidence
                block[name] = await _dedupe(kernel, n, count // rounds)
                samples[name] += block[name]
            before = percentile(block["before"], 50)
            per_round.append(
                {
                    f"{name}_over_before": ratio(percentile(block[name], 50), before)
                    for name in variants
                }
            )
        trips = {}
        for name, (evidence, n) in variants.items():
            admission.evidence = evidence
            await kernel.store.engine.dispose()
            with WireTrace(kernel.store.engine) as trace:
                await trace.attach_pool(kernel.store.ops)
                await _dedupe(kernel, n, 20)
            trips[name] = trace.analyse(20)["round_trips_per_syscall"]
    result: dict[str, Any] = {name: summary_ms(s) for name, s in samples.items()}
    for name in variants:
        values = [v for r in per_round if (v := r[f"{name}_over_before"]) is not None]
        result[f"median_round_{name}_over_before"] = (
            round(statistics.median(values), 3) if values else None
        )
    result["round_trips"] = trips
    return result


async def _concurrent(kernel: Kernel, calls: int) -> float:
    """Seconds for ``calls`` governed calls, ``CONCURRENCY`` at a time."""
    counter = itertools.count()

    async def worker() -> None:
        while (n := next(counter)) < calls:
            await kernel.syscall(f"{kernel.prefix}-burst-{n % CONCURRENCY}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - start


async def _measure_witness(url: str, rounds: int, count: int) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        kernels: dict[str, Kernel] = {}
        for name in ("intents_only", "intents_and_entries"):
            kernel = await stack.enter_async_context(
                open_kernel(url, f"served-{name}", witness=_witness(name))
            )
            feed = kernel.lifecycle.witness_feed
            assert feed is not None
            if name == "intents_only":  # the code before: no entry reached the witness
                kernel.store.ops.append_observers.remove(feed.note)
            kernels[name] = kernel
        for kernel in kernels.values():
            await kernel.timed(50)
        samples: dict[str, list[float]] = {name: [] for name in kernels}
        burst: dict[str, list[float]] = {name: [] for name in kernels}
        per_round: list[float | None] = []
        for _ in range(rounds):
            block = {}
            for name, kernel in kernels.items():
                block[name] = await kernel.timed(count // rounds)
                samples[name] += block[name]
                burst[name].append((count // rounds) / await _concurrent(kernel, count // rounds))
            per_round.append(
                ratio(
                    percentile(block["intents_and_entries"], 50),
                    percentile(block["intents_only"], 50),
                )
            )
        feed = kernels["intents_and_entries"].lifecycle.witness_feed
        assert feed is not None
        await feed.drain()
        traced = kernels["intents_and_entries"]
        await traced.store.engine.dispose()
        with WireTrace(traced.store.engine) as trace:
            await trace.attach_pool(traced.store.ops)
            await traced.timed(20)
        statements = trace.analyse(20)["statements_per_syscall"]
        await feed.drain()
    values = [v for v in per_round if v is not None]
    return {
        "sequential": {name: summary_ms(s) for name, s in samples.items()},
        "median_round_entries_over_intents_only": round(statistics.median(values), 3)
        if values
        else None,
        "concurrent_calls_per_s": {
            name: round(statistics.median(values), 1) for name, values in burst.items()
        },
        "concurrency": CONCURRENCY,
        "entries_per_fsync": round(feed.witnessed / feed.writes, 2) if feed.writes else None,
        "witness_failures": feed.failures,
        "statements_per_governed_call": statements,
    }


async def _measure_replay(url: str, rounds: int) -> dict[str, Any]:
    key = SigningKey(Ed25519PrivateKey.generate())
    witness = _witness("replay")
    async with open_kernel(url, "served-replay", witness=witness) as kernel:
        checkpointer = Checkpointer(
            key,
            PgCheckpoints(kernel.store.engine),
            SystemClock(),
            CheckpointPolicy(every=EVERY, idle_s=0),
            journal=kernel.store.ops,
            witness=witness,
        )
        kernel.store.ops.append_observers.append(checkpointer.note)
        await _fill(kernel, REPLAY_RUN, REPLAY_ENTRIES)
        await checkpointer.flush()
        feed = kernel.lifecycle.witness_feed
        assert feed is not None
        await feed.drain()
        store, clock = kernel.store.ops, SystemClock()
        tenant, run = TenantId(TENANT), RunId(REPLAY_RUN)

        async def chain_only() -> None:  # the code before: the walk, nothing else
            async with store.reading() as reads:
                report = await journal.walk(reads, tenant, run, lambda row: None)
            assert report.ok

        plain = EvidenceService(store, clock)
        full = EvidenceService(store, clock, key=key.public, witness=witness)

        async def verified(service: EvidenceService) -> None:
            report = await service.verify(tenant, run)
            assert report.ok, report

        variants = {
            "before_chain_only": chain_only,
            "chain_and_intents": lambda: verified(plain),
            "with_key_and_witness": lambda: verified(full),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, replay in variants.items():
                for _ in range(5):
                    start = time.perf_counter()
                    await replay()
                    samples[name].append(time.perf_counter() - start)
    return {
        "entries": REPLAY_ENTRIES,
        "witness_bytes": witness.path.stat().st_size,
        **{name: summary_ms(s) for name, s in samples.items()},
    }


async def measure_served(url: str, *, rounds: int, syscalls: int) -> dict[str, Any]:
    return {
        "dedupe": await _measure_dedupe(url, rounds, syscalls),
        "witness": await _measure_witness(url, rounds, syscalls),
        "replay": await _measure_replay(url, rounds),
    }


def render(figure: dict[str, Any]) -> str:
    dedupe, witness, replay = figure["dedupe"], figure["witness"], figure["replay"]
    lines = [
        "",
        "Figure 12: what is served is verified, and the witness of every entry (side by side)",
        f"{'deduplicated answer':<28} {'p50 ms':>8} {'p99 ms':>8} {'p50 / before':>13}",
    ]
    for name in (
        "before",
        "own_hash",
        "covered_100_back_cold",
        "covered_100_back",
        "after_last_checkpoint",
    ):
        s = dedupe[name]
        over = dedupe[f"median_round_{name}_over_before"]
        lines.append(f"{name:<28} {s['p50_ms']:>8} {s['p99_ms']:>8} {over!s:>13}")
    lines.append(f"round trips per dedupe: {dedupe['round_trips']}")
    lines.append(
        f"{'governed call, file witness':<28} {'p50 ms':>8} {'p99 ms':>8} {'calls/s x16':>13}"
    )
    for name in ("intents_only", "intents_and_entries"):
        s = witness["sequential"][name]
        lines.append(
            f"{name:<28} {s['p50_ms']:>8} {s['p99_ms']:>8}"
            f" {witness['concurrent_calls_per_s'][name]:>13}"
        )
    lines.append(
        f"p50 entries/intents-only: {witness['median_round_entries_over_intents_only']};"
        f" entries per fsync: {witness['entries_per_fsync']};"
        f" statements per governed call: {witness['statements_per_governed_call']}"
    )
    lines.append(
        f"{'replay of ' + str(replay['entries']) + ' entries':<28} {'p50 ms':>8} {'p99 ms':>8}"
    )
    for name in ("before_chain_only", "chain_and_intents", "with_key_and_witness"):
        s = replay[name]
        lines.append(f"{name:<28} {s['p50_ms']:>8} {s['p99_ms']:>8}")
    lines.append(f"witness file: {replay['witness_bytes']} bytes")
    return "\n".join(lines)

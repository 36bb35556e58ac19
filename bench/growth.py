"""Figure 5: syscall p50 as the journal grows; replay and chain verification of a long run.

Each journal size has its own database, seeded up front; the sizes are then
measured in alternating blocks. Background rows (other runs of the same tenant)
are seeded with set-based SQL
in every lifecycle table, so indexes and heap have the shape of real use; the
10,000-entry run that replay and verify read is a valid hash chain, computed
with ARVIS's own ``chain_hash`` and loaded with COPY.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any

import psycopg

from arvis.domain.ids import PlanId, RunId, TenantId
from arvis.domain.intent import GENESIS_HASH
from arvis.domain.journal import ExecutionArtifact, Receipt, artifact_text
from arvis.lifecycle.journal import chain_hash, recorded_text
from arvis.store.engine import libpq_url
from bench.kernel import TENANT, open_kernel
from bench.stats import summary_ms

SEED_RUN_LENGTH = 1000
CHUNK = 100_000

# One statement per table; %(lo)s/%(hi)s is the entry range, g the entry number. After
# use, a decision's attempt is journaled and its in-flight row is gone (revision 0005).
SEED = (
    """INSERT INTO runs (tenant_id, run_id, plan_id, journal_length, journal_head, receipts)
       SELECT %(t)s, 'seed-' || r, %(plan)s, {n}, md5(r::text) || md5(r::text), {n}
       FROM generate_series(%(lo)s / {n}, (%(hi)s - 1) / {n}) r
       ON CONFLICT DO NOTHING""",
    """INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,
         payload_digest, payload)
       SELECT %(t)s, 'seed-' || (g / {n}), 'c-' || g, encode(sha256(('k' || g)::bytea), 'hex'),
         'echo', md5(g::text) || md5(g::text), jsonb_build_object('n', g, 'text', 'hello')
       FROM generate_series(%(lo)s, %(hi)s - 1) g""",
    """INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id, idempotency_key,
         attempt, intent_id, boundary, retryable, body, prev_hash, entry_hash, recorded_at)
       SELECT %(t)s, 'seed-' || (g / {n}), g %% {n} + 1, 'execution', 'c-' || g,
         encode(sha256(('k' || g)::bytea), 'hex'), 1, 'int_seed_' || g, 'EFFECT_COMPLETED', false,
         jsonb_build_object('tool', 'echo', 'result', jsonb_build_object('n', g, 'text', 'hello'),
           'plan_id', %(plan)s::text, 'problem', null, 'retryable', false,
           'context', jsonb_build_object('principal_id', 'bench'),
           'capability', jsonb_build_object('id', 'cap_seed_' || g, 'state', 'CONSUMED'),
           'payload_digest', md5(g::text), 'confirmation_id', null,
           'receipt', jsonb_build_object('position', g %% {n} + 1,
             'intent_commitment', md5('c' || g) || md5('c' || g), 'store_fingerprint', 'seed')),
         md5((g - 1)::text) || md5((g - 1)::text), md5(g::text) || md5(g::text), now()
       FROM generate_series(%(lo)s, %(hi)s - 1) g""",
)


async def measure_growth(
    urls: dict[int, str], samples: int, replay_entries: int, rounds: int
) -> dict[str, Any]:
    """One database per journal size, seeded up front, then measured side by side in
    ``rounds`` alternating blocks (bench/sidebyside.py says why); replay and verify
    read a long run in the largest."""
    sizes = sorted(urls)
    seed_s: dict[int, float] = {}
    async with AsyncExitStack() as stack:
        kernels = {}
        for size in sizes:
            kernel = await stack.enter_async_context(open_kernel(urls[size], f"growth{size}"))
            await kernel.timed(50)  # binds and persists the plan the seeds refer to
            # Seeding takes minutes: off the event loop, so the open kernels' leases
            # keep beating (a lapsed lease refuses every admission, DESIGN §6).
            plan = await asyncio.to_thread(_plan_id, urls[size])
            seed_s[size] = (
                await asyncio.to_thread(_seed, urls[size], plan, 0, size) if size else 0.0
            )
            kernels[size] = kernel
        timed: dict[int, list[float]] = {size: [] for size in sizes}
        for _ in range(rounds):
            for size in sizes:
                await kernels[size].timed(10)
                timed[size] += await kernels[size].timed(samples // rounds)
        largest = kernels[sizes[-1]]
        plan = await asyncio.to_thread(_plan_id, urls[sizes[-1]])
        run_id = await asyncio.to_thread(
            _load_chain, urls[sizes[-1]], plan, replay_entries, "growth"
        )
        start = time.perf_counter()
        replayed = await largest.lifecycle.replay.replay(TenantId(TENANT), RunId(run_id))
        replay_s = time.perf_counter() - start
        start = time.perf_counter()
        report = await largest.lifecycle.evidence.verify(TenantId(TENANT), RunId(run_id))
        verify_s = time.perf_counter() - start
    if len(replayed) != replay_entries or not report.ok:
        raise RuntimeError(f"replay gave {len(replayed)} results; verify said {report}")
    points = [
        {
            "journal_entries": size,
            "seed_s": round(seed_s[size], 1),
            "syscall": summary_ms(timed[size]),
        }
        for size in sizes
    ]
    base = points[0]["syscall"]["p50_ms"]
    for point in points:
        point["p50_vs_empty"] = round(point["syscall"]["p50_ms"] / base, 3)
    return {
        "points": points,
        "rounds": rounds,
        "replay": {"entries": replay_entries, "seconds": round(replay_s, 4)},
        "verify": {
            "entries": report.entries,
            "seconds": round(verify_s, 4),
            "entries_per_s": round(report.entries / verify_s),
        },
    }


def _plan_id(url: str) -> str:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT plan_id FROM runs LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


def _seed(url: str, plan: str, lo: int, hi: int) -> float:
    start = time.perf_counter()
    with psycopg.connect(libpq_url(url)) as conn:
        for chunk_lo in range(lo, hi, CHUNK):
            params = {"t": TENANT, "plan": plan, "lo": chunk_lo, "hi": min(hi, chunk_lo + CHUNK)}
            for statement in SEED:
                conn.execute(statement.format(n=SEED_RUN_LENGTH), params)  # type: ignore[arg-type]
            conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE")
    return time.perf_counter() - start


def _load_chain(url: str, plan: str, entries: int, prefix: str) -> str:
    """A run of ``entries`` valid, hash-linked entries, as the kernel would have written."""
    run_id = f"{prefix}-replay"
    recorded_at = datetime.now(UTC)
    prev = GENESIS_HASH
    rows = []
    for position in range(1, entries + 1):
        key = f"replay-{position:064d}"[-64:]
        fields: dict[str, Any] = {
            "tenant_id": TENANT,
            "run_id": run_id,
            "position": position,
            "kind": "execution",
            "causal_id": f"c-{position}",
            "idempotency_key": key,
            "attempt": 1,
            "intent_id": f"int_replay_{position}",
            "boundary": "EFFECT_COMPLETED",
            "body": artifact_text(
                ExecutionArtifact(
                    tool="echo",
                    plan_id=PlanId(plan),
                    payload_digest="0" * 64,
                    result={"n": position, "text": "hello"},
                    receipt=Receipt(
                        position=position, intent_commitment="0" * 64, store_fingerprint="bench"
                    ),
                )
            ),
            "prev_hash": prev,
            "recorded_at": recorded_at,
        }
        prev = chain_hash(
            **{k: v for k, v in fields.items() if k not in ("body", "recorded_at")},
            recorded_at=recorded_text(recorded_at),
            body_text=fields["body"],
        )
        rows.append((*fields.values(), prev))
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_length, journal_head)"
            " VALUES (%s, %s, %s, %s, %s)",
            (TENANT, run_id, plan, entries, prev),
        )
        columns = "tenant_id, run_id, position, kind, causal_id, idempotency_key, attempt,"
        columns += " intent_id, boundary, body, prev_hash, recorded_at, entry_hash"
        with conn.cursor().copy(f"COPY journal_entries ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        conn.commit()
    return run_id

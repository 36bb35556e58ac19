"""Figure 7: what one governed call writes, beside the floor's two single-row inserts.

On a fresh database each: the WAL a block of calls generates, the rows it
inserts, updates and deletes, and the index entries those writes add (one per
index of the table for an insert or a non-HOT update), read from PostgreSQL's
own statistics; divided by the number of calls. WAL is the server's, shared by
every database on it, so with ``pg_walinspect`` (PostgreSQL 15+) only the
records touching this database's relations are counted, plus one commit record
per transaction; without it, the LSN difference is reported and is only right
on a server nothing else writes to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import psycopg

from arvis.store.engine import libpq_url
from bench.floor import Floor
from bench.kernel import open_kernel

_COUNTS = """
    SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0),
           coalesce(sum(n_tup_hot_upd), 0), coalesce(sum(n_tup_del), 0),
           coalesce(sum((n_tup_ins + n_tup_upd - n_tup_hot_upd)
                        * (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid)), 0)
      FROM pg_stat_user_tables t
"""


_COMMIT_RECORD_BYTES = 34  # a commit record with no subtransactions or invalidations
_OURS = """
    SELECT coalesce(sum(record_length), 0) FROM pg_get_wal_records_info(%s, %s)
     WHERE block_ref LIKE '%%/' || (SELECT oid FROM pg_database
                                     WHERE datname = current_database()) || '/%%'
"""


def _snapshot(url: str) -> tuple[int, ...]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        counts = conn.execute(_COUNTS).fetchone()
    assert lsn is not None
    assert counts is not None
    return (int(lsn[0]), *(int(c) for c in counts))


def _wal_of_this_database(url: str, start: int, end: int, commits: int) -> int | None:
    try:
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            row = conn.execute(
                _OURS,
                (f"{start >> 32:X}/{start & 0xFFFFFFFF:X}", f"{end >> 32:X}/{end & 0xFFFFFFFF:X}"),
            ).fetchone()
    except psycopg.Error:
        return None
    assert row is not None
    return int(row[0]) + commits * _COMMIT_RECORD_BYTES


def _per_call(
    url: str, before: tuple[int, ...], after: tuple[int, ...], calls: int
) -> dict[str, Any]:
    wal, ins, upd, hot, dele, index = (a - b for a, b in zip(after, before, strict=True))
    ours = _wal_of_this_database(url, before[0], after[0], 2 * calls)
    return {
        "wal_bytes": round((ours if ours is not None else wal) / calls, 1),
        "wal_counted": "this database's records (pg_walinspect)"
        if ours is not None
        else "server LSN",
        "rows_inserted": round(ins / calls, 2),
        "rows_updated": round(upd / calls, 2),
        "of_which_hot": round(hot / calls, 2),
        "rows_deleted": round(dele / calls, 2),
        "index_insertions": round(index / calls, 2),
    }


# An idle backend flushes its statistics within 10 s (PGSTAT_IDLE_INTERVAL); wait that out.
_SETTLE_S = 10.5


def _measured(url: str, calls: int, run: Callable[[], None]) -> dict[str, Any]:
    time.sleep(_SETTLE_S)
    before = _snapshot(url)
    run()
    time.sleep(_SETTLE_S)
    return _per_call(url, before, _snapshot(url), calls)


def measure_writeset(kernel_url: str, floor_url: str, calls: int) -> dict[str, Any]:
    with Floor(floor_url) as floor:
        floor.pairs("autocommit", 20)
        floor_figures = _measured(floor_url, calls, lambda: floor.pairs("autocommit", calls))

    async def kernel_block() -> dict[str, Any]:
        async with open_kernel(kernel_url, "writeset") as kernel:
            await kernel.timed(20)
            loop = asyncio.get_running_loop()
            await asyncio.sleep(_SETTLE_S)
            before = await loop.run_in_executor(None, _snapshot, kernel_url)
            await kernel.timed(calls)
            await asyncio.sleep(_SETTLE_S)
            after = await loop.run_in_executor(None, _snapshot, kernel_url)
        return _per_call(kernel_url, before, after, calls)

    kernel_figures = asyncio.run(kernel_block())
    return {
        "calls": calls,
        "floor": floor_figures,
        "kernel": kernel_figures,
        "wal_ratio": round(kernel_figures["wal_bytes"] / floor_figures["wal_bytes"], 2)
        if floor_figures["wal_bytes"]
        else None,
    }

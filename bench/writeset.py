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


def _lsn(url: str) -> int:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def _lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class WalCounter:
    """This database's WAL records, read a chunk of calls at a time: on a server that
    others write to, a whole block's segments may be recycled before they are read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.bytes: int | None = 0
        self.why = ""
        try:
            with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error as exc:
            self._lost(exc)

    def _lost(self, exc: psycopg.Error) -> None:
        self.bytes = None
        self.why = str(exc).splitlines()[0]
        print(f"[bench] writeset: counting the server's LSN instead: {self.why}")

    def count(self, start: int, end: int) -> None:
        if self.bytes is None:
            return
        try:
            with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
                row = conn.execute(_OURS, (_lsn_text(start), _lsn_text(end))).fetchone()
        except psycopg.Error as exc:
            self._lost(exc)
            return
        assert row is not None
        self.bytes += int(row[0])

    def total(self, commits: int) -> int | None:
        return None if self.bytes is None else self.bytes + commits * _COMMIT_RECORD_BYTES


def _per_call(
    before: tuple[int, ...], after: tuple[int, ...], calls: int, ours: int | None, why: str
) -> dict[str, Any]:
    wal, ins, upd, hot, dele, index = (a - b for a, b in zip(after, before, strict=True))
    return {
        "wal_bytes": round((ours if ours is not None else wal) / calls, 1),
        "wal_counted": "this database's records (pg_walinspect)"
        if ours is not None
        else f"server LSN ({why or 'no pg_walinspect'})",
        "rows_inserted": round(ins / calls, 2),
        "rows_updated": round(upd / calls, 2),
        "of_which_hot": round(hot / calls, 2),
        "rows_deleted": round(dele / calls, 2),
        "index_insertions": round(index / calls, 2),
    }


_CHUNK = 100
# An idle backend flushes its statistics within 10 s (PGSTAT_IDLE_INTERVAL); wait that out.
_SETTLE_S = 10.5


def measure_writeset(kernel_url: str, floor_url: str, calls: int) -> dict[str, Any]:
    with Floor(floor_url) as floor:
        floor.pairs("autocommit", 20)
        wal = WalCounter(floor_url)
        time.sleep(_SETTLE_S)
        before = _snapshot(floor_url)
        for done in range(0, calls, _CHUNK):
            start = _lsn(floor_url)
            floor.pairs("autocommit", min(_CHUNK, calls - done))
            wal.count(start, _lsn(floor_url))
        time.sleep(_SETTLE_S)
        floor_figures = _per_call(
            before, _snapshot(floor_url), calls, wal.total(2 * calls), wal.why
        )

    async def kernel_block() -> dict[str, Any]:
        async with open_kernel(kernel_url, "writeset") as kernel:
            await kernel.timed(20)
            loop = asyncio.get_running_loop()
            wal = WalCounter(kernel_url)
            await asyncio.sleep(_SETTLE_S)
            before = await loop.run_in_executor(None, _snapshot, kernel_url)
            for done in range(0, calls, _CHUNK):
                start = await loop.run_in_executor(None, _lsn, kernel_url)
                await kernel.timed(min(_CHUNK, calls - done))
                end = await loop.run_in_executor(None, _lsn, kernel_url)
                await loop.run_in_executor(None, wal.count, start, end)
            await asyncio.sleep(_SETTLE_S)
            after = await loop.run_in_executor(None, _snapshot, kernel_url)
        return _per_call(before, after, calls, wal.total(2 * calls), wal.why)

    kernel_figures = asyncio.run(kernel_block())
    return {
        "calls": calls,
        "floor": floor_figures,
        "kernel": kernel_figures,
        "wal_ratio": round(kernel_figures["wal_bytes"] / floor_figures["wal_bytes"], 2)
        if floor_figures["wal_bytes"]
        else None,
    }

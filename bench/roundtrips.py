"""Round trips per syscall, counted on the wire with libpq's protocol trace.

The harness attaches ``PQtrace`` to every pooled psycopg connection: the
SQLAlchemy engine's (pool events) and the hot path's psycopg pool (swapped for
a traced one), from the bench side only; nothing in ``arvis/`` changes. Each
``ReadyForQuery`` from the server ends exactly one round trip, so their count is
the round-trip count, BEGIN and COMMIT included.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


class WireTrace:
    """Traces every connection of an engine into one file while active."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.sync_engine
        self._file = tempfile.NamedTemporaryFile("w+", suffix=".pqtrace", delete=False)  # noqa: SIM115
        self._traced: dict[int, Any] = {}
        self.path = Path(self._file.name)

    def __enter__(self) -> WireTrace:
        event.listen(self._engine, "checkout", self._on_checkout)
        return self

    def _on_checkout(self, dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        self._trace(dbapi_conn.driver_connection.pgconn)

    def _trace(self, pgconn: Any) -> None:
        if id(pgconn) not in self._traced:
            pgconn.trace(self._file.fileno())
            pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            self._traced[id(pgconn)] = pgconn

    async def attach_pool(self, fast: Any) -> None:
        """Swap the hot path's pool for a fresh one whose connections are traced."""
        from psycopg_pool import AsyncConnectionPool

        old = fast.pool

        async def configure(conn: Any) -> None:
            self._trace(conn.pgconn)

        fast.pool = AsyncConnectionPool(
            old.conninfo, kwargs=old.kwargs, min_size=1, max_size=4, configure=configure, open=False
        )
        await fast.pool.open(wait=True)
        await old.close()

    def __exit__(self, *_exc: object) -> None:
        event.remove(self._engine, "checkout", self._on_checkout)
        for pgconn in self._traced.values():
            pgconn.untrace()
        self._file.close()

    def analyse(self, syscalls: int) -> dict[str, Any]:
        lines = self.path.read_text(errors="replace").splitlines()
        self.path.unlink(missing_ok=True)
        ready = sum(1 for line in lines if line.startswith("B\t") and "\tReadyForQuery\t" in line)
        executed = _executed_statements(lines)
        return {
            "syscalls_traced": syscalls,
            "round_trips_per_syscall": round(ready / syscalls, 2),
            "statements_per_syscall": round(sum(executed.values()) / syscalls, 2),
            "statements": [
                {"statement": text[:200], "per_syscall": round(count / syscalls, 2)}
                for text, count in executed.most_common()
            ],
        }


_PARSE = re.compile(r'^ "([^"]*)" "(.*)" \d+')
_BIND = re.compile(r'^ "[^"]*" "([^"]*)"')


def _executed_statements(lines: list[str]) -> Counter[str]:
    """Each executed statement's text: simple queries, and binds of parsed statements."""
    texts: dict[str, str] = {}
    executed: Counter[str] = Counter()
    for line in lines:
        if not line.startswith("F\t"):
            continue
        _, _, kind, rest = ([*line.split("\t", 3), ""])[:4]
        if kind == "Query":
            executed[rest.strip().strip('"')] += 1
        elif kind == "Parse" and (m := _PARSE.match(rest)):
            texts[m.group(1)] = m.group(2)
        elif kind == "Bind" and (m := _BIND.match(rest)):
            executed[texts.get(m.group(1), "<unknown>")] += 1
    return executed

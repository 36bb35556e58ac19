"""Figure 1: the physical floor, two single-row INSERT + COMMIT transactions from psycopg 3."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from arvis.store.engine import libpq_url
from bench.stats import summary_ms

DDL = "CREATE TABLE IF NOT EXISTS floor_rows (id bigserial PRIMARY KEY, body jsonb NOT NULL)"
INSERT = "INSERT INTO floor_rows (body) VALUES (%s)"


def measure_floor(url: str, pairs: int, warmup: int = 50) -> dict[str, Any]:
    """p50/p99 of one pair of durable commits, and of the autocommit variant.

    ``explicit``: psycopg's default (BEGIN, INSERT, COMMIT: three round trips per
    transaction), the shape the issue names. ``autocommit``: one statement that
    commits on its own (one round trip), the lower bound any client can reach.
    """
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(DDL)
        conn.commit()
        explicit = _loop(conn, pairs, warmup)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        autocommit = _loop(conn, pairs, warmup)
    return {
        "pair": summary_ms(explicit),
        "pair_autocommit": summary_ms(autocommit),
        "round_trips_per_pair": 6,
        "round_trips_per_pair_autocommit": 2,
    }


def _loop(conn: psycopg.Connection[Any], pairs: int, warmup: int) -> list[float]:
    samples: list[float] = []
    for i in range(warmup + pairs):
        start = time.perf_counter()
        for step in (1, 2):
            conn.execute(INSERT, (Jsonb({"i": i, "step": step}),))
            conn.commit()
        if i >= warmup:
            samples.append(time.perf_counter() - start)
    return samples

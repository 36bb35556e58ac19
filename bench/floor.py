"""Figure 1: the physical floor, two single-row INSERT + COMMIT transactions from psycopg 3."""

from __future__ import annotations

import itertools
import time
from types import TracebackType
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from arvis.store.engine import libpq_url

DDL = "CREATE TABLE IF NOT EXISTS floor_rows (id bigserial PRIMARY KEY, body jsonb NOT NULL)"
INSERT = "INSERT INTO floor_rows (body) VALUES (%s)"


class Floor:
    """Two connections to time one pair of durable commits in two shapes.

    ``explicit``: psycopg's default (BEGIN, INSERT, COMMIT: three round trips per
    transaction), the shape the issue names. ``autocommit``: one statement that
    commits on its own (one round trip), the lower bound any client can reach.
    """

    ROUND_TRIPS = {"explicit": 6, "autocommit": 2}

    def __init__(self, url: str) -> None:
        self.explicit = psycopg.connect(libpq_url(url))
        self.explicit.execute(DDL)
        self.explicit.commit()
        self.autocommit = psycopg.connect(libpq_url(url), autocommit=True)
        self._numbers = itertools.count()

    def __enter__(self) -> Floor:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.explicit.close()
        self.autocommit.close()

    def pairs(self, shape: str, count: int) -> list[float]:
        """Seconds per pair of INSERT + COMMIT transactions, ``count`` pairs."""
        conn = self.explicit if shape == "explicit" else self.autocommit
        samples: list[float] = []
        for _ in range(count):
            i = next(self._numbers)
            start = time.perf_counter()
            for step in (1, 2):
                conn.execute(INSERT, (Jsonb({"i": i, "step": step}),))
                conn.commit()
            samples.append(time.perf_counter() - start)
        return samples


def floor_result(explicit: list[float], autocommit: list[float]) -> dict[str, Any]:
    from bench.stats import summary_ms

    return {
        "pair": summary_ms(explicit),
        "pair_autocommit": summary_ms(autocommit),
        "round_trips_per_pair": Floor.ROUND_TRIPS["explicit"],
        "round_trips_per_pair_autocommit": Floor.ROUND_TRIPS["autocommit"],
    }

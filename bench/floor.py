"""Figure 1: the physical floor, two single-row INSERT + COMMIT transactions from psycopg 3."""

from __future__ import annotations

import itertools
import json
import time
from types import TracebackType
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from arvis.store.engine import libpq_url
from arvis.store.statements import ADMIT_SQL, JOURNAL_SQL

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


class Statements:
    """The kernel's two statements alone (``arvis_admit``, then ``arvis_journal``
    settling the attempt), from the same client and in the same shape as the floor:
    what PostgreSQL itself spends on a governed call, with none of ARVIS's Python
    around it. The arguments are what the kernel sends for an ``echo`` call."""

    PLAN = "b" * 64
    CONTEXT = (
        '{"auth_method":"api_key","causal_id":"c","instance_id":"i/1","key_id":"k_bench",'
        '"plan_id":"' + "b" * 64 + '","principal_id":"bench","roles":["agent"],'
        '"run_id":"r","tenant_id":"bench"}'
    )
    BODY = (
        '{"capability":{"activated_at":"2026-12-01T12:00:00Z","consumed_at":"2026-12-01T12:00:00Z",'
        '"id":"cap_x","minted_at":"2026-12-01T12:00:00Z","state":"CONSUMED"},'
        '"confirmation_id":null,"context":' + CONTEXT + ',"payload_digest":"' + "d" * 64 + '",'
        '"plan_id":"'
        + "b" * 64
        + '","problem":null,"receipt":{"intent_commitment":"'
        + "c" * 64
        + '","position":1,"store_fingerprint":"'
        + "f" * 64
        + '"},'
        '"result":{"n":1,"text":"hello"},"retryable":false,"tool":"echo"}'
    )

    # Which policy decided, as admission records it on the attempt (no budgets apply).
    POLICY = '{"engine":"rules","version":"v1","digest":"' + "e" * 64 + '","policy_ids":[]}'

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(libpq_url(url), autocommit=True, prepare_threshold=0)
        self.conn.execute(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')"
            " ON CONFLICT DO NOTHING",
            (self.PLAN,),
        )
        self._numbers = itertools.count()

    def __enter__(self) -> Statements:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.conn.close()

    @classmethod
    def admit_args(cls, n: int, tag: str = "st") -> tuple[object, ...]:
        """The admission statement's arguments for the ``n``-th echo call (a run every
        500): the tenant and a batch of one item (issue 25), as a lone governed call
        sends it."""
        item = {
            "run": f"{tag}-run-{n // 500}",
            "plan": cls.PLAN,
            "causal": f"c-{n}",
            "idempotency_key": f"{n:064x}",
            "tool": "echo",
            "digest": "d" * 64,
            "attempt": 1,
            "intent": f"int_{tag}_{n}",
            "capability": f"cap_{tag}_{n}",
            "payload": '{"n":1,"text":"hello"}',
            "commitment": "c" * 64,
            "context": cls.CONTEXT,
            "owner": "i/1",
            "reserve": False,
            "policy": cls.POLICY,
        }
        return ("bench", json.dumps([item], separators=(",", ":")))

    def pairs(self, count: int) -> list[float]:
        samples: list[float] = []
        for _ in range(count):
            n = next(self._numbers)
            run, key, intent = f"st-run-{n // 500}", f"{n:064x}", f"int_st_{n}"
            start = time.perf_counter()
            admitted = self.conn.execute(ADMIT_SQL, self.admit_args(n))
            if (row := admitted.fetchone()) is None or row[0] != "admitted":
                raise RuntimeError(f"arvis_admit answered {row}")
            journaled = self.conn.execute(
                JOURNAL_SQL,
                (
                    "bench",
                    json.dumps(
                        [
                            {
                                "tenant": "bench",
                                "run": run,
                                "kind": "execution",
                                "causal": f"c-{n}",
                                "idempotency_key": key,
                                "attempt": 1,
                                "intent": intent,
                                "boundary": "EFFECT_COMPLETED",
                                "retryable": False,
                                "body": self.BODY,
                                "recorded_at": "2026-12-01T12:00:00.000000+00:00",
                                "settle": True,
                                "release_budgets": False,
                            }
                        ],
                        separators=(",", ":"),
                    ),
                ),
            )
            if (row := journaled.fetchone()) is None or row[0] != "appended":
                raise RuntimeError(f"arvis_journal answered {row}")
            samples.append(time.perf_counter() - start)
        return samples

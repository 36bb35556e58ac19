"""``arvis serve --workers N`` under one ARVIS_INSTANCE_ID: each worker holds a lease name of
its own, so a worker that dies and is restarted never sweeps a sibling's call in flight
(issue 12, finding 4; DESIGN §6), while it takes over its dead predecessor's name at once
(issue 23, finding 12; DESIGN §10)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from arvis.store.engine import libpq_url
from tests.support.http import mint_keys
from tests.support.reliability import Served, auth, syscall_body

pytestmark = pytest.mark.db

CONFIG = '[tools]\nfactories = ["tests.support.slowtools:make_tools"]\n'


def _until(condition: Any, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_restarted_worker_never_sweeps_its_siblings_call_in_flight(
    database_url: str, tmp_path: Path
) -> None:
    def sql(query: str, *params: object) -> list[tuple[Any, ...]]:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def live() -> int:
        return len(sql("SELECT 1 FROM instance_leases WHERE NOT released"))

    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent",)))
    (tmp_path / "arvis.toml").write_text(CONFIG)
    served = Served(
        database_url,
        tmp_path,
        instance_id="workers-test",
        args=["--workers", "2"],
        env={
            # Far longer than the test: a name comes free only by a takeover.
            "ARVIS_LEASE_TTL_S": "120",
            "ARVIS_SWEEP_INTERVAL_S": "0.3",
            "ARVIS_LOG_LEVEL": "INFO",
        },
    )
    served.start()
    try:
        _until(lambda: live() == 2, "both workers should hold a lease")
        names = {row[0] for row in sql("SELECT instance_id FROM instance_leases")}
        assert names == {"workers-test/1", "workers-test/2"}

        body = syscall_body("run-workers", "slow-1", "slow.write", {"seconds": 4})
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(
                httpx.post,
                f"{served.base_url}/v1/syscalls",
                json=body,
                headers=auth(tokens["acme:agent"]),
                timeout=30,
            )
            _until(lambda: sql("SELECT 1 FROM attempts WHERE causal_id = 'slow-1'"), "admitted")
            owner = sql("SELECT owner FROM attempts WHERE causal_id = 'slow-1'")[0][0]
            sibling = sql(
                "SELECT holder FROM instance_leases WHERE instance_id <> %s AND NOT released",
                owner,
            )
            holders = {row[0] for row in sql("SELECT holder FROM instance_leases")}
            os.kill(int(str(sibling[0][0]).split(":")[0]), signal.SIGKILL)
            # The supervisor restarts the killed worker: it takes over the killed
            # worker's name (that process is gone), never the sibling's (it is alive),
            # and sweeps at start-up, then every 0.3 s, while the call is in flight.
            _until(
                lambda: {r[0] for r in sql("SELECT holder FROM instance_leases")} - holders,
                "the restarted worker should claim a lease name",
            )
            names_after = {row[0] for row in sql("SELECT instance_id FROM instance_leases")}
            answer = call.result(timeout=30)

        assert names_after == {"workers-test/1", "workers-test/2"}
        assert answer.status_code == 200, answer.text
        outcome = answer.json()
        assert (outcome["outcome"], outcome["boundary"]) == ("executed", "EFFECT_COMPLETED")
        assert outcome["audit_incomplete"] is False
        assert sql("SELECT kind FROM journal_entries WHERE causal_id = 'slow-1'") == [
            ("execution",)
        ]
        assert sql("SELECT audit_incomplete FROM runs WHERE run_id = 'run-workers'") == [(False,)]
    except AssertionError as exc:
        log = (tmp_path / "serve-workers-test.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"{exc}\n--- arvis serve log (tail) ---\n{log}") from exc
    finally:
        assert served.terminate() == 0

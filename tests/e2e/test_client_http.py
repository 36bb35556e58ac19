"""``arvis.client`` over real HTTP to ``arvis serve``: a lost answer, a killed server.

The answer to the first post is lost after ARVIS committed it (the transport drops it),
and the server is SIGKILLed and started again while the client retries. The retry
re-posts the identical syscall through the refused connections of the restart, and
the new server answers ``deduplicated``: the line was appended once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from arvis.client import ArvisClient, AsyncArvisClient, Deduplicated, Executed, RetryPolicy
from arvis.store.engine import libpq_url
from tests.support.client import LosingTransport, Losses
from tests.support.http import mint_keys
from tests.support.reliability import Served

pytestmark = pytest.mark.db

# files.append is replay-unsafe: a second run would show as a second line.
CONFIG = '[policy.default]\nno_consent_tools = ["files.append"]\n'
PATIENT = RetryPolicy(total_s=60, initial_backoff_s=0.05, max_backoff_s=0.5, retry_refused=True)


@pytest.fixture(scope="module")
def tokens(database_url: str) -> dict[str, str]:
    return asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent",)))


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    server = Served(database_url, tmp_path, instance_id=f"client-{tmp_path.name}")
    try:
        yield server
    finally:
        server.terminate()


def _executions(database_url: str, run_id: str) -> int:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        query = "SELECT count(*) FROM journal_entries WHERE run_id = %s AND kind = 'execution'"
        row = conn.execute(query, (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def _log(served: Served) -> str:
    path = served.data_dir / f"serve-{served.instance_id}.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def test_a_lost_answer_re_posted_across_a_killed_server_is_deduplicated_and_runs_once(
    served: Served, tokens: dict[str, str], database_url: str
) -> None:
    served.start()

    def kill_and_restart() -> None:
        served.kill9()
        served.spawn()  # not waited for: the client's retry rides out the start-up

    losses = Losses()
    losses.lose(1, then=kill_and_restart)
    payload = {"path": "http.log", "line": "exactly once"}
    client = ArvisClient(
        served.base_url, tokens["acme:agent"], transport=LosingTransport(losses), retry=PATIENT
    )
    with client:
        answer = client.execute("run-http", "append-1", "files.append", payload)

    assert isinstance(answer, Deduplicated), _log(served)
    assert answer.causal_id == "append-1"
    assert served.starts == 2
    bodies = losses.bodies()
    assert len(bodies) >= 2
    assert len(set(bodies)) == 1
    assert (served.data_dir / "sandbox" / "http.log").read_text() == "exactly once\n"
    assert _executions(database_url, "run-http") == 1


async def test_a_call_made_while_arvis_is_down_runs_once_it_is_up(
    served: Served, tokens: dict[str, str], database_url: str
) -> None:
    client = AsyncArvisClient(served.base_url, tokens["acme:agent"], retry=PATIENT)
    payload = {"path": "late.log", "line": "after the start"}
    async with client:
        call = asyncio.create_task(client.execute("run-late", "append-1", "files.append", payload))
        await asyncio.sleep(0.2)
        assert not call.done()  # refused connections, retried
        await asyncio.to_thread(served.start)
        answer = await call

    assert isinstance(answer, Executed), _log(served)
    assert (served.data_dir / "sandbox" / "late.log").read_text() == "after the start\n"
    assert _executions(database_url, "run-late") == 1

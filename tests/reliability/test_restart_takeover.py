"""A stable instance id settles its own crash at start-up, at once (DESIGN §10), and a live
process's call is never settled by anyone else (DESIGN §6): ``arvis serve`` SIGKILLed with a
call in flight and restarted under the same ``ARVIS_INSTANCE_ID``, with a lease ttl far
longer than the test, beside a live process of the same id.

The tool (``gated.once``, unsafe) reports its start and stays in flight until the test
creates its gate file, so nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http import mint_keys
from tests.support.postgres import sql
from tests.support.reliability import Served, auth, report, syscall_body

pytestmark = [pytest.mark.db, pytest.mark.reliability]

CONFIG = """
[tools]
factories = ["tests.support.slowtools:make_gated_tools"]

[policy.default]
no_consent_tools = ["gated.once"]
"""
# Nothing expires during the test: only a takeover at start-up can settle the call.
LONG_LEASE = {
    "ARVIS_LEASE_TTL_S": "3600",
    "ARVIS_SWEEP_INTERVAL_S": "3600",
    "ARVIS_TOOL_TIMEOUT_S": "300",
}


def _until(condition: Callable[[], object], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@contextmanager
def _posting(served: Served, token: str, body: dict[str, Any]) -> Iterator[Future[Any]]:
    """``body`` posted in the background; its future answers the response or the
    transport error of a killed server."""
    with ThreadPoolExecutor(1) as pool:

        def post() -> Any:
            try:
                return httpx.post(
                    f"{served.base_url}/v1/syscalls", json=body, headers=auth(token), timeout=300
                )
            except httpx.TransportError as exc:
                return exc

        yield pool.submit(post)


def _started(database_url: str, causal_id: str) -> bool:
    rows = sql(
        database_url, "SELECT started_at IS NOT NULL FROM attempts WHERE causal_id = %s", causal_id
    )
    return rows == [(True,)]


def _served(database_url: str, data_dir: Path) -> Served:
    return Served(database_url, data_dir, instance_id="takeover", env=LONG_LEASE)


@pytest.fixture
def agent(database_url: str) -> str:
    return asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent",)))["acme:agent"]


def test_a_restart_under_the_same_instance_id_settles_its_crashed_call_at_once(
    database_url: str, tmp_path: Path, agent: str
) -> None:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    served = _served(database_url, tmp_path)
    body = syscall_body("run-takeover", "crashed", "gated.once", {"gate": str(tmp_path / "gate")})
    served.start()
    try:
        with _posting(served, agent, body) as lost:
            _until(lambda: _started(database_url, "crashed"), "the call should be in flight")
            served.kill9()
            assert isinstance(lost.result(timeout=60), httpx.TransportError)
        served.start()

        again = httpx.post(
            f"{served.base_url}/v1/syscalls", json=body, headers=auth(agent), timeout=60
        )
    finally:
        served.terminate()

    # Not 409 attempt_in_flight: the restarted process settled its predecessor's call at
    # start-up, so the unsafe call's re-post is refused on its recorded uncertain outcome.
    assert again.status_code == 200, again.text
    answer = again.json()
    assert (answer["outcome"], answer["reason"]) == ("refused", "retry_prohibited_uncertain")
    journal = sql(
        database_url,
        "SELECT kind, boundary FROM journal_entries WHERE causal_id = 'crashed' ORDER BY position",
    )
    report(
        f"restart takeover: re-post after the restart answered {again.status_code}"
        f" {answer.get('reason')}, journal {journal}"
    )
    assert journal == [("recovery", "EFFECT_STARTED"), ("refusal", "PRE_EFFECT_REFUSAL")]
    assert sql(database_url, "SELECT count(*) FROM attempts") == [(0,)]


def test_a_restarting_process_never_settles_a_live_siblings_call_of_the_same_instance_id(
    database_url: str, tmp_path: Path, agent: str
) -> None:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    live, restarted = _served(database_url, tmp_path), _served(database_url, tmp_path)
    live_gate, lost_gate = tmp_path / "live-gate", tmp_path / "lost-gate"
    kept = syscall_body("run-live", "kept", "gated.once", {"gate": str(live_gate)})
    lost_body = syscall_body("run-lost", "lost", "gated.once", {"gate": str(lost_gate)})
    live.start()
    restarted.start()
    try:
        with (
            _posting(live, agent, kept) as kept_answer,
            _posting(restarted, agent, lost_body) as lost_answer,
        ):
            _until(lambda: _started(database_url, "kept"), "the live call should be in flight")
            _until(lambda: _started(database_url, "lost"), "the lost call should be in flight")
            owners = dict(sql(database_url, "SELECT causal_id, owner FROM attempts"))
            assert owners["kept"] != owners["lost"]
            restarted.kill9()
            assert isinstance(lost_answer.result(timeout=60), httpx.TransportError)
            restarted.start()

            lost_again = httpx.post(
                f"{restarted.base_url}/v1/syscalls", json=lost_body, headers=auth(agent), timeout=60
            )
            # The live process's call is still in flight, still its own.
            still = sql(database_url, "SELECT owner FROM attempts WHERE causal_id = 'kept'")
            kept_journal = sql(
                database_url, "SELECT kind FROM journal_entries WHERE causal_id = 'kept'"
            )
            live_gate.touch()
            done = kept_answer.result(timeout=120)
    finally:
        restarted.terminate()
        live.terminate()

    report(
        f"restart beside a live sibling: lost call re-posted {lost_again.status_code}"
        f" {lost_again.json().get('reason')}, live call {done!r} with journal {kept_journal}"
        " while the sibling restarted"
    )
    assert lost_again.status_code == 200, lost_again.text
    assert lost_again.json()["reason"] == "retry_prohibited_uncertain"
    assert still == [(owners["kept"],)]
    assert kept_journal == []
    assert isinstance(done, httpx.Response), done
    outcome = done.json()
    assert (outcome["outcome"], outcome["boundary"]) == ("executed", "EFFECT_COMPLETED")
    assert outcome["audit_incomplete"] is False
    assert sql(database_url, "SELECT kind FROM journal_entries WHERE causal_id = 'kept'") == [
        ("execution",)
    ]

"""``arvis turn`` stops as a per-turn instance does (arvis.cli.instance): on SIGTERM it stops
admitting, lets the call in flight finish and journal, releases its lease and exits 0; it
exits 1 when a call it admitted outlasts the grace period."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import typer

from arvis.bootstrap import build_kernel
from arvis.cli.instance import run_admitting
from arvis.cli.turn import operator_identity
from arvis.config import Settings
from arvis.domain.decisions import ActionDecision
from arvis.kernel import Kernel
from arvis.lifecycle.request import Syscall
from tests.support.turntools import CONFIG

pytestmark = pytest.mark.db


async def _kernel(database_url: str, tmp_path: Path, instance_id: str, **settings: float) -> Kernel:
    (tmp_path / "arvis.toml").write_text(CONFIG)
    return await build_kernel(
        Settings(
            database_url=database_url,
            data_dir=tmp_path,
            config=tmp_path / "arvis.toml",
            instance_id=instance_id,
            **settings,
        )
    )


Use = Callable[[Kernel], Awaitable[None]]


def _slow_turn(run_id: str, seconds: float, calls: int, submitted: list[str]) -> Use:
    async def use(kernel: Kernel) -> None:
        for n in range(calls):
            submitted.append(f"c{n}")
            decision = ActionDecision(tool="slow.write", payload={"seconds": seconds})
            syscall = Syscall(
                name="tool.execute", run_id=run_id, causal_id=f"c{n}", decision=decision
            )
            await kernel.lifecycle.handler.handle(syscall, operator_identity("acme"))

    return use


async def _stopped(kernel: Kernel, use: Use, after_s: float) -> int:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers need the main thread")
    asyncio.get_running_loop().call_later(after_s, os.kill, os.getpid(), signal.SIGTERM)
    try:
        with pytest.raises(typer.Exit) as stopped:
            await run_admitting(kernel, use)
    finally:
        await kernel.close()
    return int(stopped.value.exit_code)


async def test_sigterm_ends_the_turn_after_its_call_in_flight_is_journaled(
    database_url: str, tmp_path: Path
) -> None:
    kernel = await _kernel(database_url, tmp_path, "turn-stop-a")
    submitted: list[str] = []
    code = await _stopped(kernel, _slow_turn("turn-stop-a", 0.8, 3, submitted), after_s=0.3)

    assert code == 0
    # The second decision came after the stop: refused at the door, never admitted.
    assert submitted == ["c0", "c1"]
    rows = _sql(
        database_url,
        "SELECT causal_id, boundary FROM journal_entries WHERE run_id = %s",
        "turn-stop-a",
    )
    assert rows == [("c0", "EFFECT_COMPLETED")]
    assert _sql(
        database_url,
        "SELECT bool_and(released) FROM instance_leases WHERE instance_id LIKE 'turn-stop-a/%%'",
    ) == [(True,)]


async def test_a_call_that_outlasts_the_grace_period_makes_the_turn_exit_1(
    database_url: str, tmp_path: Path
) -> None:
    kernel = await _kernel(database_url, tmp_path, "turn-stop-b", shutdown_grace_s=0.3)
    code = await _stopped(kernel, _slow_turn("turn-stop-b", 30, 1, []), after_s=0.3)

    assert code == 1
    # Cut off after it started: journaled as started, outcome unknown; never completed.
    assert _sql(
        database_url, "SELECT boundary FROM journal_entries WHERE run_id = %s", "turn-stop-b"
    ) == [("EFFECT_STARTED",)]


def _sql(url: str, query: str, *params: object) -> list[tuple[object, ...]]:
    import psycopg

    from arvis.store.engine import libpq_url

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []

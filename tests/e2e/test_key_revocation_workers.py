"""A revoked API key is refused on the very next request by every serving process, though
each caches the keys it has seen (arvis.store.keycache): two ``arvis serve`` on one
database, one of them with two workers, and revocation through the CLI and through the
console."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from arvis.store.engine import libpq_url
from arvis.store.keycache import LISTENER_NAME
from tests.support.console import sign_in
from tests.support.http import mint_keys
from tests.support.reliability import Served, auth

pytestmark = pytest.mark.db

REQUESTS_PER_SERVER = 8
"""Each on a fresh connection, so both workers of a two-worker server answer some."""


def _listeners(database_url: str) -> int:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (LISTENER_NAME,),
        ).fetchone()
    return int(row[0]) if row else 0


def _statuses(servers: list[Served], token: str) -> set[int]:
    """What each server answers ``GET /v1/tools`` with this key, fresh connections."""
    seen = set()
    for served in servers:
        for _ in range(REQUESTS_PER_SERVER):
            answer = httpx.get(f"{served.base_url}/v1/tools", headers=auth(token), timeout=10)
            seen.add(answer.status_code)
    return seen


@pytest.fixture
def servers(database_url: str, tmp_path: Path) -> Iterator[list[Served]]:
    started = []
    try:
        for name, args in (("revoke-a", ["--workers", "2"]), ("revoke-b", [])):
            served = Served(database_url, tmp_path / name, instance_id=name, args=args)
            served.data_dir.mkdir()
            served.start()
            started.append(served)
        deadline = time.monotonic() + 30
        while _listeners(database_url) < 3:  # one per worker: every cache is live
            assert time.monotonic() < deadline, "every worker should listen for revocations"
            time.sleep(0.05)
        yield started
    finally:
        for served in started:
            served.terminate()


def test_a_key_revoked_by_the_cli_is_refused_next_by_every_worker(
    database_url: str, servers: list[Served]
) -> None:
    token = asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent",)))["acme:agent"]
    assert _statuses(servers, token) == {200}  # now cached by every worker that answered
    key_id = token.split("_")[1]
    done = subprocess.run(
        [sys.executable, "-m", "arvis", "keys", "revoke", key_id],
        env=_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _statuses(servers, token) == {401}


async def test_a_key_revoked_in_the_console_is_refused_next_by_every_worker(
    database_url: str, servers: list[Served]
) -> None:
    tokens = await mint_keys(database_url, tenants=("acme",), roles=("agent", "admin"))
    agent = tokens["acme:agent"]
    assert await asyncio.to_thread(_statuses, servers, agent) == {200}
    async with httpx.AsyncClient(base_url=servers[1].base_url, timeout=10) as browser:
        csrf = await sign_in(browser, tokens["acme:admin"])
        revoked = await browser.post(
            f"/console/keys/{agent.split('_')[1]}/revoke", data={"csrf_token": csrf}
        )
    assert revoked.status_code == 303, revoked.text
    assert await asyncio.to_thread(_statuses, servers, agent) == {401}


def _env(database_url: str) -> dict[str, Any]:
    return {**os.environ, "ARVIS_DATABASE_URL": database_url, "ARVIS_LOG_LEVEL": "WARNING"}

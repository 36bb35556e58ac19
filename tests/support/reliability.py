"""Shared pieces of the reliability suite: sizes, `arvis serve` subprocesses, patient clients.

Sizes come from ``ARVIS_RELIABILITY_SCALE``: ``ci`` (default, the whole folder in
a few minutes on two cores) or ``full`` (what ``make reliability`` runs).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

SCALE = os.environ.get("ARVIS_RELIABILITY_SCALE", "ci")
if SCALE not in ("ci", "full"):
    raise RuntimeError(f"ARVIS_RELIABILITY_SCALE must be ci or full, not {SCALE!r}")
FULL = SCALE == "full"


def size(ci: int, full: int) -> int:
    return full if FULL else ci


SUMMARY: list[str] = []
"""The scenarios' lines; tests/reliability/conftest.py prints them in pytest's summary."""


def report(line: str) -> None:
    """Record a scenario's summary line (printed at the end of the session), and append
    it to ``$ARVIS_RELIABILITY_SUMMARY`` when that names a file."""
    SUMMARY.append(line)
    target = os.environ.get("ARVIS_RELIABILITY_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port something listens on for the block: any bind to it fails."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@dataclass
class Served:
    """``arvis serve`` in a subprocess, which a test may SIGKILL and start again."""

    database_url: str
    data_dir: Path
    instance_id: str
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    """More ``arvis serve`` options, e.g. ``["--workers", "2"]``."""
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spawn(self) -> None:
        config = self.data_dir / "arvis.toml"
        if not config.exists():
            config.write_text("")
        env = {
            **os.environ,
            "ARVIS_DATABASE_URL": self.database_url,
            "ARVIS_DATA_DIR": str(self.data_dir),
            "ARVIS_CONFIG": str(config),
            "ARVIS_INSTANCE_ID": self.instance_id,
            "ARVIS_LOG_LEVEL": os.environ.get("ARVIS_RELIABILITY_LOG_LEVEL", "WARNING"),
            **self.env,
        }
        log = (self.data_dir / f"serve-{self.instance_id}.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "arvis", "serve", "--port", str(self.port), *self.args],
            stdout=log,
            stderr=log,
            env=env,
        )
        log.close()
        self.starts += 1

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"arvis serve exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError("arvis serve did not become ready")

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def terminate(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.terminate()
        return self.process.wait(timeout=60)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def syscall_body(run_id: str, causal_id: str, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": causal_id,
        "decision": {"tool": tool, "payload": payload},
    }


@dataclass
class Tally:
    """What the clients saw, for the summary line and the assertions."""

    statuses: dict[int, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    transport_errors: int = 0
    client_timeouts: int = 0
    slowest_s: float = 0.0
    unexpected: list[str] = field(default_factory=list)

    def saw(self, response: httpx.Response, elapsed_s: float) -> None:
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        self.slowest_s = max(self.slowest_s, elapsed_s)
        if response.status_code >= 400:
            try:
                code = str(response.json().get("code"))
            except ValueError:
                code = "not-json"
            self.codes[code] = self.codes.get(code, 0) + 1

    def count(self, predicate: Any) -> int:
        return sum(n for status, n in self.statuses.items() if predicate(status))


class PatientAgent:
    """Posts one action until it has a governed answer, the way a careful agent would:

    a lost answer is re-posted with the same ids; 503 and ``attempt_in_flight``
    are waited out; consent is asked for and given through the API.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_urls: list[str],
        agent_token: str,
        approver_token: str,
        tally: Tally,
        *,
        request_timeout_s: float = 30.0,
    ) -> None:
        self.client = client
        self.base_urls = base_urls
        self.agent = auth(agent_token)
        self.approver = auth(approver_token)
        self.tally = tally
        self.request_timeout_s = request_timeout_s

    async def _post(
        self, url: str, headers: dict[str, str], body: dict[str, Any] | None
    ) -> httpx.Response | None:
        started = time.monotonic()
        try:
            response = await self.client.post(
                url, json=body, headers=headers, timeout=self.request_timeout_s
            )
        except httpx.TimeoutException:
            self.tally.client_timeouts += 1
            self.tally.slowest_s = max(self.tally.slowest_s, time.monotonic() - started)
            return None
        except httpx.TransportError:
            self.tally.transport_errors += 1
            self.tally.slowest_s = max(self.tally.slowest_s, time.monotonic() - started)
            await asyncio.sleep(0.05)
            return None
        self.tally.saw(response, time.monotonic() - started)
        return response

    async def settle(
        self, body: dict[str, Any], *, server: int = 0, give_up_after_s: float = 60
    ) -> dict[str, Any]:
        """The governed answer (executed, deduplicated or refused) for ``body``."""
        base = self.base_urls[server]
        deadline = time.monotonic() + give_up_after_s
        seen: list[str] = []
        while time.monotonic() < deadline:
            response = await self._post(f"{base}/v1/syscalls", self.agent, body)
            if response is None:
                seen.append("lost")
                continue
            status = response.status_code
            seen.append(f"{status} {response.text[:300]}")
            if status == 200:
                answer: dict[str, Any] = response.json()
                return answer
            if status == 202:
                await self._approve(base, response.json()["confirmation"]["id"], deadline)
                continue
            code = _code(response)
            if (status, code) in ((409, "attempt_in_flight"), (503, "store_unavailable")) or (
                status == 503 and code in ("shutting_down", "request_timeout")
            ):
                await asyncio.sleep(0.1)
                continue
            self.tally.unexpected.append(f"{status} {code} for {body['causal_id']}")
            raise AssertionError(f"unexpected answer {status}: {response.text}")
        raise AssertionError(
            f"no governed answer for {body['causal_id']} in {give_up_after_s}s; last: {seen[-4:]}"
        )

    async def _approve(self, base: str, confirmation_id: str, deadline: float) -> None:
        url = f"{base}/v1/confirmations/{confirmation_id}/approve"
        while time.monotonic() < deadline:
            response = await self._post(url, self.approver, None)
            if response is None:
                continue
            if response.status_code == 200:
                return
            if (response.status_code, _code(response)) == (409, "already_approved"):
                return  # our approval stands; its answer was lost
            if response.status_code == 503:
                await asyncio.sleep(0.1)
                continue
            raise AssertionError(f"approval answered {response.status_code}: {response.text}")


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json().get("code"))
    except ValueError:
        return "not-json"

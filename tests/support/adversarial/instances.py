"""INSTANCES: the processes that admit syscalls and hold a lease (DESIGN §6), as a table:
``arvis serve`` and ``arvis serve-turn RUN``, each started as a subprocess of a deployment,
killed with SIGKILL, and started again under the same ``ARVIS_INSTANCE_ID``.

A new kind of admitting process (a worker, ``arvis turn``) is one more row.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

from tests.support.adversarial.deployment import REPO, Deployment
from tests.support.perturn import TurnInstance


class Instance(Protocol):
    @property
    def url(self) -> str: ...

    def kill9(self) -> None: ...

    def stop(self) -> None: ...


class _Turn:
    def __init__(self, turn: TurnInstance) -> None:
        self._turn = turn

    @property
    def url(self) -> str:
        return self._turn.url

    def kill9(self) -> None:
        self._turn.kill9()

    def stop(self) -> None:
        from tests.support.adversarial.deployment import stop

        stop(self._turn)


class _Serve:
    """``arvis serve`` on a port of its own, ready once ``/readyz`` answers 200."""

    def __init__(self, deployment: Deployment, env: dict[str, str], label: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        log = (deployment.data_dir / f"serve-{label}.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "arvis", "serve", "--port", str(self.port)],
            stdout=log,
            stderr=log,
            env=env,
            cwd=REPO,
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"arvis serve exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill9()
        raise AssertionError("arvis serve did not become ready")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill9(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


def _start_turn(deployment: Deployment, run_id: str, instance_id: str, label: str) -> Instance:
    env = deployment.env(lite=True, ARVIS_INSTANCE_ID=instance_id, **LONG_LEASE)
    log = deployment.data_dir / f"turn-{label}.log"
    return _Turn(TurnInstance(run_id, env, log).start())


def _start_serve(deployment: Deployment, run_id: str, instance_id: str, label: str) -> Instance:
    env = deployment.env(lite=True, ARVIS_INSTANCE_ID=instance_id, **LONG_LEASE)
    return _Serve(deployment, env, label)


LONG_LEASE = {"ARVIS_LEASE_TTL_S": "120", "ARVIS_SWEEP_INTERVAL_S": "120"}
"""A lease that outlives the test: only settling at start-up can settle a dead one's call."""


@dataclass(frozen=True)
class InstanceKind:
    name: str
    start: Callable[[Deployment, str, str, str], Instance]
    """``start(deployment, run_id, instance_id, label)``: started and answering."""

    def __repr__(self) -> str:
        return f"InstanceKind({self.name})"


INSTANCES: tuple[InstanceKind, ...] = (
    InstanceKind("serve", _start_serve),
    InstanceKind("serve-turn", _start_turn),
)
"""Every kind of process that admits. Add a row to hold a new one to the restart rules."""

"""The checkout's wheel, built once per session and installed in a fresh venv outside it.

What ``pip install arvis`` gives a user is the wheel, not the checkout: the migrations, their
SQL and ``py.typed`` must be inside it, and nothing may come from the source tree at run time.
Tests that run the installed ``arvis`` take the session fixture ``installed_wheel``; the
environment it hands out has no ``PYTHONPATH`` and nothing of the test process's, so with a
working directory outside the checkout an import that only works from a checkout fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.reliability import free_port

CHECKOUT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 300.0
INSTALL_TIMEOUT_S = 600.0

# A build in the checkout would reuse its build/ and *.egg-info, and a stale build/lib carries
# files since deleted from the source into the new wheel; so the wheel is built from a copy.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".arvis",
)


@dataclass(frozen=True)
class InstalledWheel:
    """The built wheel and the venv it is installed in (with its dependencies)."""

    wheel: Path
    venv: Path
    site_packages: Path
    """The venv's purelib: where the installed ``arvis`` package lives."""
    home: Path

    @property
    def arvis(self) -> Path:
        """The venv's ``arvis`` console script."""
        return self.venv / "bin" / "arvis"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, **extra: str) -> dict[str, str]:
        """An environment that cannot see the checkout: the venv's ``bin`` first on ``PATH``,
        a ``HOME`` of its own, no ``PYTHONPATH``; nothing else but ``extra``."""
        return {
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.defpath}",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            **extra,
        }

    def run(
        self, program: Path, *args: str, cwd: Path, env: dict[str, str], timeout_s: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run one of the venv's programs (``self.arvis``, ``self.python``) to completion."""
        return subprocess.run(
            [str(program), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    @contextmanager
    def serving(self, *, cwd: Path, env: dict[str, str]) -> Iterator[Serving]:
        """``arvis serve`` on a free port, yielded once ``/healthz`` answers; killed on exit
        unless the test stopped it."""
        port = free_port()
        log_path = cwd / f"serve-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [str(self.arvis), "serve", "--port", str(port)],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        served = Serving(process, f"http://127.0.0.1:{port}", log_path)
        try:
            served.wait_healthy()
            yield served
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@dataclass(frozen=True)
class Serving:
    """A running ``arvis serve`` of the installed wheel."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def wait_healthy(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"arvis serve exited with {self.process.returncode}:\n{self.log()}"
                )
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"arvis serve did not answer /healthz in {timeout_s}s:\n{self.log()}")

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM, as a service manager stops it; the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


def _step(what: str, argv: list[str], timeout_s: float) -> None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} took longer than {timeout_s:.0f}s: {argv}", pytrace=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        pytest.fail(f"{what} failed ({done.returncode}): {argv}\n{tail}", pytrace=False)


def build_wheel(source: Path, into: Path) -> Path:
    """Build ``source``'s wheel (no dependencies) from a clean copy; return its path."""
    copy = into / "src"
    shutil.copytree(source, copy, ignore=_NOT_SOURCE)
    dist = into / "dist"
    _step(
        "building the wheel",
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(copy)],
        BUILD_TIMEOUT_S,
    )
    wheels = sorted(dist.glob("arvis-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def install_wheel(wheel: Path, venv: Path) -> InstalledWheel:
    """A fresh venv at ``venv`` with ``wheel`` and its dependencies installed."""
    # No pip inside the venv: this process's pip installs into it (--python), which saves
    # seeding one, and bytecode is compiled on first import rather than for every dependency.
    _step("creating the venv", [sys.executable, "-m", "venv", "--without-pip", str(venv)], 120)
    python = venv / "bin" / "python"
    _step(
        "installing the wheel",
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-input",
            "--no-compile",
            str(wheel),
        ],
        INSTALL_TIMEOUT_S,
    )
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={"PATH": os.defpath},
    ).stdout.strip()
    home = venv.parent / "home"
    home.mkdir()
    return InstalledWheel(wheel=wheel, venv=venv, site_packages=Path(purelib), home=home)


@pytest.fixture(scope="session")
def installed_wheel() -> Iterator[InstalledWheel]:
    """The checkout's wheel installed in a venv in a temporary directory outside it."""
    with tempfile.TemporaryDirectory(prefix="arvis-wheel-") as scratch:
        root = Path(scratch).resolve()
        if root.is_relative_to(CHECKOUT):
            pytest.fail(f"the temporary directory {root} is inside the checkout", pytrace=False)
        yield install_wheel(build_wheel(CHECKOUT, root), root / "venv")

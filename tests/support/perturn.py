"""``arvis serve-turn`` in a subprocess, as an orchestrator runs it: one per agent turn.

The process prints one JSON line on stdout once it answers (``ready``) and one when it
has stopped (``stopped``); logs go to a file of the test's.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def turn_env(database_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a per-turn instance of one deployment (its data dir and
    ``arvis.toml``), on the test's database."""
    config = data_dir / "arvis.toml"
    if not config.exists():
        config.write_text("")
    return {
        **os.environ,
        "ARVIS_DATABASE_URL": database_url,
        "ARVIS_DATA_DIR": str(data_dir),
        "ARVIS_CONFIG": str(config),
        "ARVIS_LOG_LEVEL": os.environ.get("ARVIS_RELIABILITY_LOG_LEVEL", "WARNING"),
        **extra,
    }


@dataclass
class TurnInstance:
    """One ``arvis serve-turn RUN`` process."""

    run_id: str
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[str] | None = None
    ready: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    ready_after_s: float = 0.0

    @property
    def url(self) -> str:
        return str(self.ready["url"])

    def start(self, *args: str, timeout_s: float = 60) -> TurnInstance:
        """Spawn it and wait for its ready line."""
        self.started_at = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "arvis", "serve-turn", self.run_id, *args],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=self.env,
                text=True,
            )
        line = self._line(timeout_s)
        if line is None:
            code = self.process.poll()
            self.kill9()
            raise AssertionError(f"serve-turn gave no ready line (exit {code}):\n{self.log()}")
        self.ready = json.loads(line)
        self.ready_after_s = time.monotonic() - self.started_at
        assert self.ready["event"] == "ready", self.ready
        return self

    def _line(self, timeout_s: float) -> str | None:
        assert self.process is not None
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not readable:
            return None
        line = self.process.stdout.readline()
        return line or None

    def stop(self, timeout_s: float = 60) -> tuple[int, dict[str, Any] | None]:
        """SIGTERM, as an orchestrator ends the turn; the exit status and the stopped line."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout_s)
        assert self.process.stdout is not None
        rest = self.process.stdout.read().strip().splitlines()
        stopped = json.loads(rest[-1]) if rest else None
        return code, stopped

    def kill9(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

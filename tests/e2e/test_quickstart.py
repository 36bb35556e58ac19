"""``arvis quickstart`` on a fresh data directory: keys once, a URL, a curl that works."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.postgres import create_database, drop_database


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(url: str, data_dir: Path, port: int) -> tuple[subprocess.Popen[str], list[str]]:
    env = {**os.environ, "ARVIS_DATABASE_URL": url, "ARVIS_DATA_DIR": str(data_dir)}
    env["ARVIS_CONFIG"] = str(data_dir / "arvis.toml")
    process = subprocess.Popen(
        [sys.executable, "-m", "arvis", "quickstart", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Then follow"):
            break
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return process, lines
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("\n".join(lines))


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=20)


def test_quickstart_mints_demo_keys_once_and_prints_a_working_curl(
    pg_server_url: str, tmp_path: Path
) -> None:
    url = create_database(pg_server_url)
    (tmp_path / "arvis.toml").write_text("")
    port = _free_port()
    try:
        process, first = _start(url, tmp_path, port)
        try:
            keys_file = tmp_path / "demo-keys.json"
            tokens = json.loads(keys_file.read_text())
            assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
            assert set(tokens) >= {"agent", "approver", "auditor"}
            assert all(token in "\n".join(first) for token in tokens.values())
            curl = next(line for line in first if "curl" in line)
            assert f"http://127.0.0.1:{port}/v1/syscalls" in curl
            # What the printed curl does:
            body_line = next(line for line in first if line.strip().startswith("-d "))
            body = json.loads(body_line.strip()[3:].strip("'"))
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/syscalls",
                json=body,
                headers={"Authorization": f"Bearer {tokens['agent']}"},
            )
            assert response.status_code == 200, response.text
            assert response.json()["outcome"] == "executed"
        finally:
            _stop(process)

        process, second = _start(url, tmp_path, port)
        _stop(process)
        assert json.loads(keys_file.read_text()) == tokens
        assert not any(token in "\n".join(second) for token in tokens.values())
        assert any("created at the first start" in line for line in second)
    finally:
        drop_database(pg_server_url, url)

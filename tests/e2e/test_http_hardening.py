"""``arvis serve`` bounds what a client can hold: request head size and time, idle and
stuck connections, the number of connections. Over raw sockets, against the real
served app, with httptools (the default) and with the h11 fallback."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.bootstrap import build_kernel
from arvis.config import Environment
from arvis.serving.app import create_app
from tests.support.http import app_settings, mint_keys
from tests.support.reliability import free_port

HEADER_TIMEOUT_S = 2.0
KEEP_ALIVE_S = 1
REQUEST_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 150
MAX_HEADER_BYTES = 64 * 1024

# `arvis serve` in a process where httptools and uvloop cannot be imported, as on
# an installation without them: uvicorn and ARVIS fall back to h11 and asyncio.
_WITHOUT_HTTPTOOLS = (
    "import sys; sys.modules['httptools'] = None; sys.modules['uvloop'] = None; "
    "from arvis.cli import main; main()"
)


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    protocol: str
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connect(self, timeout_s: float = 10) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s)

    def memory_kib(self) -> dict[str, int]:
        """VmRSS and VmHWM (the peak) of the server process, in KiB."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}

    def maps(self) -> str:
        return Path(f"/proc/{self.process.pid}/maps").read_text()

    def holds(self, client: socket.socket) -> bool:
        """Whether the server process still has the other end of ``client`` open."""
        client_port = client.getsockname()[1]
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            remote_port = int(fields[2].split(":")[1], 16)
            if (local_port, remote_port) == (self.port, client_port):
                inodes.add(fields[9])
        fds = Path(f"/proc/{self.process.pid}/fd")
        held = set()
        for fd in fds.iterdir():
            with suppress(FileNotFoundError):
                held.add(os.readlink(fd))
        return any(f"socket:[{inode}]" in held for inode in inodes)

    def healthz_s(self) -> float:
        """Seconds a /healthz on a new connection takes to answer 200."""
        started = time.monotonic()
        response = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=10)
        assert response.status_code == 200
        return time.monotonic() - started


@pytest.fixture(scope="module", params=["httptools", "h11"])
def server(
    request: pytest.FixtureRequest, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp(f"arvis-hardening-{request.param}")
    (data_dir / "arvis.toml").write_text("")
    port = free_port()
    env = {
        **os.environ,
        "ARVIS_DATABASE_URL": database_url,
        "ARVIS_DATA_DIR": str(data_dir),
        "ARVIS_CONFIG": str(data_dir / "arvis.toml"),
        "ARVIS_LOG_LEVEL": "WARNING",
        "ARVIS_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "ARVIS_KEEP_ALIVE_TIMEOUT_S": str(KEEP_ALIVE_S),
        "ARVIS_REQUEST_TIMEOUT_S": str(REQUEST_TIMEOUT_S),
        "ARVIS_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "ARVIS_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES),
    }
    launcher = ["-m", "arvis"] if request.param == "httptools" else ["-c", _WITHOUT_HTTPTOOLS]
    log = (data_dir / "serve.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, *launcher, "serve", "--port", str(port)], stdout=log, stderr=log, env=env
    )
    log.close()
    tokens = asyncio.run(mint_keys(database_url, tenants=(f"acme-{request.param}",)))
    tokens = {who.replace(f"-{request.param}", ""): token for who, token in tokens.items()}
    served = Server(process, port, request.param, tokens)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (data_dir / "serve.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "arvis serve did not become ready"
            time.sleep(0.05)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=30)


def _read_until_closed(sock: socket.socket, timeout_s: float = 10) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as
    closed); fails if it is still open after ``timeout_s``."""
    sock.settimeout(timeout_s)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        except TimeoutError:
            raise AssertionError(f"still open after {timeout_s} s") from None
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _problem(raw: bytes, status: int, code: str) -> dict[str, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), raw[:200]
    assert b"content-type: application/problem+json" in head.lower()
    document: dict[str, Any] = json.loads(body)
    assert document["code"] == code
    assert document["status"] == status
    return document


def _send_head(sock: socket.socket, total: int, chunk: int = 64 * 1024) -> bool:
    """A GET whose one header is ``total`` bytes long, sent in chunks. False when the
    server closed the connection before all of it was sent."""
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: arvis\r\nX-Big: ")
        sent = 0
        while sent < total:
            sock.sendall(b"a" * min(chunk, total - sent))
            sent += chunk
        sock.sendall(b"\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def test_the_fallback_server_really_runs_without_httptools(server: Server) -> None:
    assert ("httptools" in server.maps()) is (server.protocol == "httptools")


def test_a_one_megabyte_header_is_431_and_the_connection_closes(server: Server) -> None:
    with server.connect() as sock:
        _send_head(sock, 1024 * 1024)
        answer = _read_until_closed(sock)
    problem = _problem(answer, 431, "header_too_large")
    assert str(MAX_HEADER_BYTES) in problem["detail"]


def test_a_head_at_the_limit_is_served(server: Server) -> None:
    line = b"GET /healthz HTTP/1.1\r\nHost: arvis\r\nConnection: close\r\nX-Pad: "
    padding = MAX_HEADER_BYTES - len(line) - len(b"\r\n\r\n")
    with server.connect() as sock:
        sock.sendall(line + b"p" * padding + b"\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_a_60_mb_header_neither_stalls_nor_grows_the_server(server: Server) -> None:
    server.healthz_s()
    before = server.memory_kib()
    outcome: dict[str, Any] = {}

    def attack() -> None:
        with server.connect(timeout_s=30) as sock:
            outcome["sent_all"] = _send_head(sock, 60 * 1024 * 1024)
            outcome["answer"] = _read_until_closed(sock, timeout_s=30)

    attacker = threading.Thread(target=attack)
    attacker.start()
    latencies = []
    while attacker.is_alive() or not latencies:
        latencies.append(server.healthz_s())
    attacker.join()
    after = server.memory_kib()

    answer = outcome["answer"]
    if answer:  # the server may reset the connection before the refusal is read
        _problem(answer, 431, "header_too_large")
    assert max(latencies) < 1.0, latencies
    grown_mib = (after["VmHWM"] - before["VmRSS"]) / 1024
    assert grown_mib < 48, (before, after)


def test_a_slow_loris_is_cut_off_after_the_header_timeout(server: Server) -> None:
    with server.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: arvis\r\n")
        answer = b""
        for n in range(20):
            try:
                sock.sendall(f"X-Line-{n}: x\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                break
            readable, _, _ = select.select([sock], [], [], 1.0)
            if readable:
                answer = _read_until_closed(sock)
                break
        elapsed = time.monotonic() - started
    _problem(answer, 408, "header_timeout")
    assert HEADER_TIMEOUT_S - 0.5 < elapsed < HEADER_TIMEOUT_S + 3, elapsed


def test_a_hundred_slow_loris_connections_are_all_closed(server: Server) -> None:
    socks = [server.connect() for _ in range(100)]
    try:
        for sock in socks:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: arvis\r\n")
        started = time.monotonic()
        open_ = set(socks)
        refused = 0
        line = 0
        while open_ and time.monotonic() - started < HEADER_TIMEOUT_S + 8:
            line += 1
            for sock in list(open_):
                try:
                    sock.sendall(f"X-Line-{line}: x\r\n".encode())
                except (BrokenPipeError, ConnectionResetError):
                    open_.discard(sock)
            readable, _, _ = select.select(list(open_), [], [], 0.5)
            for sock in readable:
                answer = _read_until_closed(sock)
                refused += answer.startswith(b"HTTP/1.1 408 ")
                open_.discard(sock)
        assert not open_, f"{len(open_)} of 100 still open"
        assert refused >= 90, refused
        assert server.healthz_s() < 1.0
    finally:
        for sock in socks:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(
    server: Server,
) -> None:
    with server.connect() as sock:
        started = time.monotonic()
        answer = _read_until_closed(sock)
        elapsed = time.monotonic() - started
    assert answer == b""
    assert HEADER_TIMEOUT_S - 0.5 < elapsed < HEADER_TIMEOUT_S + 3, elapsed


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(
    server: Server,
) -> None:
    with server.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: arvis\r\n\r\n")
        answered = b""
        while b'"ok"}' not in answered:
            answered += sock.recv(4096)
        started = time.monotonic()
        rest = _read_until_closed(sock)
        elapsed = time.monotonic() - started
    assert answered.startswith(b"HTTP/1.1 200 ")
    assert rest == b""
    assert KEEP_ALIVE_S - 0.5 < elapsed < KEEP_ALIVE_S + 3, elapsed


def test_a_body_still_arriving_after_the_deadline_answer_is_cut_off(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(
            b"POST /v1/syscalls HTTP/1.1\r\nHost: arvis\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < REQUEST_TIMEOUT_S + 10:
            try:
                sock.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            readable, _, _ = select.select([sock], [], [], 0.5)
            if readable:
                answer = _read_until_closed(sock, timeout_s=5)
                break
        elapsed = time.monotonic() - started
    _problem(answer, 503, "request_timeout")
    assert elapsed < REQUEST_TIMEOUT_S + 5, elapsed


def test_a_client_that_stops_reading_its_answer_is_disconnected(server: Server) -> None:
    # A journal page of several megabytes that the client never reads: uvicorn's
    # writes back up, and without a bound it would wait for this client for ever.
    run_id = f"run-unread-{server.protocol}"
    agent = {"Authorization": f"Bearer {server.tokens['acme:agent']}"}
    for n in range(8):
        body = {
            "name": "tool.execute",
            "run_id": run_id,
            "causal_id": f"c-{n}",
            "decision": {"tool": "echo", "payload": {"blob": "x" * 900_000}},
        }
        posted = httpx.post(f"{server.url}/v1/syscalls", json=body, headers=agent, timeout=30)
        assert posted.status_code == 200, posted.text
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(
            f"GET /v1/runs/{run_id}/journal?limit=8 HTTP/1.1\r\nHost: arvis\r\n"
            f"Authorization: Bearer {server.tokens['acme:auditor']}\r\n\r\n".encode()
        )
        started = time.monotonic()
        while not server.holds(sock):  # accepted a moment after connect() returns
            assert time.monotonic() - started < 5, "never accepted"
            time.sleep(0.01)
        while server.holds(sock):
            assert time.monotonic() - started < REQUEST_TIMEOUT_S + 8, "still held"
            time.sleep(0.1)
        assert time.monotonic() - started > REQUEST_TIMEOUT_S - 0.5
    finally:
        sock.close()
    assert server.healthz_s() < 1.0


def test_a_client_pipelining_far_ahead_is_cut_off_without_growing_the_server(
    server: Server,
) -> None:
    server.healthz_s()
    before = server.memory_kib()
    requests = 100_000
    answered = 0
    with server.connect(timeout_s=20) as sock:
        sender = threading.Thread(
            target=_send_quietly,
            args=(sock, b"GET /healthz HTTP/1.1\r\nHost: arvis\r\n\r\n" * requests),
        )
        sender.start()
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answered += chunk.count(b"HTTP/1.1 200 ")
        sender.join()
    after = server.memory_kib()
    assert answered < requests
    assert (after["VmHWM"] - before["VmRSS"]) / 1024 < 48, (before, after)
    assert server.healthz_s() < 1.0


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with suppress(OSError):
        sock.sendall(data)


def test_past_max_connections_a_new_connection_gets_503_and_is_closed(server: Server) -> None:
    held = [server.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        with server.connect() as extra:
            answer = _read_until_closed(extra, timeout_s=HEADER_TIMEOUT_S)
        _problem(answer, 503, "too_many_connections")
        # The ones within the limit were not refused: nothing waits to be read on them.
        readable, _, _ = select.select(held, [], [], 0.2)
        assert len(readable) <= 5, len(readable)
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 5
    while True:
        try:
            assert server.healthz_s() < 1.0
            break
        except (AssertionError, httpx.TransportError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@asynccontextmanager
async def _app_in(
    environment: Environment, database_url: str, data_dir: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    settings = app_settings(database_url, data_dir, env=environment)
    tokens = await mint_keys(database_url, tenants=("acme",))
    app = create_app(functools.partial(build_kernel, settings), environment=environment)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
            yield client, tokens


async def test_outside_production_the_api_docs_are_open(database_url: str, tmp_path: Path) -> None:
    async with _app_in(Environment.DEVELOPMENT, database_url, tmp_path) as (client, _):
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await client.get(path)).status_code == 200, path
        assert "/v1/syscalls" in (await client.get("/openapi.json")).json()["paths"]


async def test_in_production_the_docs_are_not_served_and_the_schema_needs_a_key(
    database_url: str, tmp_path: Path
) -> None:
    async with _app_in(Environment.PRODUCTION, database_url, tmp_path) as (client, tokens):
        for path in ("/docs", "/redoc"):
            response = await client.get(path)
            assert (response.status_code, response.json()["code"]) == (404, "not_found"), path
        anonymous = await client.get("/openapi.json")
        assert (anonymous.status_code, anonymous.json()["code"]) == (401, "unauthenticated")
        keyed = await client.get(
            "/openapi.json", headers={"Authorization": f"Bearer {tokens['acme:agent']}"}
        )
        assert keyed.status_code == 200
        assert "/v1/syscalls" in keyed.json()["paths"]
        assert "/openapi.json" not in keyed.json()["paths"]

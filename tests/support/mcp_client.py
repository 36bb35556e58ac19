"""MCP e2e compositions: a served ARVIS, and the official SDK's client on it.

The app runs under uvicorn on a thread of its own (``tests.support.server``),
so the client speaks real streamable HTTP to it, exactly as any MCP client would.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import httpx2
import mcp_types as types
import psycopg
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from arvis.bootstrap import build_kernel
from arvis.serving.app import create_app
from arvis.store.engine import libpq_url
from tests.support.http import app_settings, mint_keys
from tests.support.server import running

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing

NOTES_SERVER = Path(__file__).resolve().parent / "upstream" / "notes_server.py"


def notes_command(state: Path, *extra: str) -> str:
    """The TOML array that starts the test upstream server on ``state``."""
    parts = [sys.executable, str(NOTES_SERVER), str(state), *extra]
    return "[" + ", ".join(f'"{part}"' for part in parts) + "]"


@dataclass
class Served:
    """A running ARVIS: its base URL and one key per (tenant, role)."""

    url: str
    tokens: dict[str, str]
    database_url: str
    data_dir: Path

    def sandbox_text(self, name: str) -> str:
        """A file the built-in files.* tools wrote, as it is on disk."""
        return (self.data_dir / "sandbox" / name).read_text()

    def runs(self) -> list[tuple[str, str]]:
        """Every (tenant, run id) in the store."""
        with psycopg.connect(libpq_url(self.database_url), autocommit=True) as conn:
            return [(str(t), str(r)) for t, r in conn.execute("SELECT tenant_id, run_id FROM runs")]

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    @asynccontextmanager
    async def client(
        self,
        who: str = "acme:agent",
        *,
        elicitation: ElicitationFnT | None = None,
        mode: str = "auto",
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Client]:
        """The SDK's client with this principal's bearer key (and any extra headers)."""
        http = httpx2.AsyncClient(headers={**self.auth(who), **(headers or {})})
        transport = streamable_http_client(self.mcp_url, http_client=http)
        async with http, Client(transport, mode=mode, elicitation_callback=elicitation) as client:
            yield client

    async def api(self, method: str, path: str, who: str, **kwargs: Any) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as http:
            return await http.request(method, path, headers=self.auth(who), **kwargs)

    async def journal(self, run_id: str, who: str = "acme:auditor") -> list[dict[str, Any]]:
        response = await self.api("GET", f"/v1/runs/{run_id}/journal", who)
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries

    async def approve(self, confirmation_id: str, who: str = "acme:approver") -> None:
        response = await self.api("POST", f"/v1/confirmations/{confirmation_id}/approve", who)
        assert response.status_code == 200, response.text


@contextmanager
def serve_arvis(
    database_url: str,
    data_dir: Path,
    config: str | None = None,
    *,
    tracing: Tracing | None = None,
) -> Iterator[Served]:
    """ARVIS on a free local port, with ``config`` as its ``arvis.toml`` (and ``tracing``
    handed to its kernel)."""
    overrides: dict[str, Any] = {}
    if config is not None:
        path = data_dir / "arvis.toml"
        path.write_text(config)
        overrides["config"] = path
    settings = app_settings(database_url, data_dir, **overrides)
    # A thread of its own: the caller may be inside a running event loop.
    with ThreadPoolExecutor(1) as pool:
        tokens = pool.submit(asyncio.run, mint_keys(database_url)).result()
    app = create_app(functools.partial(build_kernel, settings, tracing=tracing))
    with running(app) as url:
        yield Served(url=url, tokens=tokens, database_url=database_url, data_dir=data_dir)


def meta_of(result: types.CallToolResult) -> dict[str, Any]:
    """The ``arvis.dev/*`` keys of an answer."""
    return {k: v for k, v in (result.meta or {}).items() if k.startswith("arvis.dev/")}


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))

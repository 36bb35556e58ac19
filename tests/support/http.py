"""The real app over HTTP for e2e tests: lifespan run, real store, keys per tenant and role."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
from fastapi import FastAPI, Request

from arvis.bootstrap import administration, build_kernel
from arvis.config import Settings
from arvis.domain.identity import Role
from arvis.kernel import Kernel
from arvis.serving.app import create_app
from arvis.store.engine import libpq_url
from arvis.web.identity import get_kernel

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing

ROLES: tuple[Role, ...] = ("agent", "approver", "auditor", "admin")
TENANTS = ("acme", "globex")


@dataclass
class Api:
    """An HTTP client on the app, with one key per (tenant, role)."""

    app: FastAPI
    client: httpx.AsyncClient
    database_url: str
    tokens: dict[str, str]
    """``"acme:agent"`` → bearer token."""

    def auth(self, who: str = "acme:agent") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    async def syscall(
        self,
        tool: str,
        payload: dict[str, Any],
        *,
        run_id: str,
        causal_id: str,
        who: str = "acme:agent",
    ) -> httpx.Response:
        body = {
            "name": "tool.execute",
            "run_id": run_id,
            "causal_id": causal_id,
            "decision": {"tool": tool, "payload": payload},
        }
        return await self.client.post("/v1/syscalls", json=body, headers=self.auth(who))

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(libpq_url(self.database_url), autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def journal_count(self) -> int:
        return int(self.sql("SELECT count(*) FROM journal_entries")[0][0])

    def journal_rows(self, run_id: str) -> list[tuple[str, str, str | None]]:
        """``(kind, causal id, boundary)`` of each entry of the run, in chain order."""
        rows = self.sql(
            "SELECT kind, causal_id, boundary FROM journal_entries WHERE run_id = %s"
            " ORDER BY position",
            run_id,
        )
        return [(str(k), str(c), None if b is None else str(b)) for k, c, b in rows]

    @contextmanager
    def routed(self) -> Iterator[list[str]]:
        """The paths of the requests that reach a FastAPI route while this is open.

        Every route gets the kernel through the ``get_kernel`` dependency, which the
        syscall fast lane never calls; FastAPI's own dependency override records it.
        """
        paths: list[str] = []

        async def recording(request: Request) -> Kernel:
            paths.append(request.url.path)
            return await get_kernel(request)

        self.app.dependency_overrides[get_kernel] = recording
        try:
            yield paths
        finally:
            del self.app.dependency_overrides[get_kernel]


async def mint_keys(
    database_url: str, tenants: Sequence[str] = TENANTS, roles: Sequence[Role] = ROLES
) -> dict[str, str]:
    async with administration(database_url) as admin:
        tokens: dict[str, str] = {}
        for tenant in tenants:
            for role in roles:
                _, issued = await admin.keys.create(tenant, f"{role}-of-{tenant}", [role])
                tokens[f"{tenant}:{role}"] = issued.token
        return tokens


def app_settings(database_url: str, data_dir: Path, **overrides: Any) -> Settings:
    return Settings(database_url=database_url, data_dir=data_dir, **overrides)


@asynccontextmanager
async def serve_api(
    database_url: str,
    data_dir: Path,
    *,
    max_body_bytes: int = 64 * 1024,
    fast_lane: bool = True,
    config: str | None = None,
    tracing: Tracing | None = None,
    settings: dict[str, Any] | None = None,
) -> AsyncIterator[Api]:
    """The app with its lifespan running, and an ``httpx`` client speaking ASGI to it.

    ``config`` is the text of an ``arvis.toml`` for the deployment; ``tracing`` is
    handed to its kernel (``build_kernel``); ``settings`` are more ``Settings`` fields.
    """
    overrides: dict[str, Any] = {"max_body_bytes": max_body_bytes, **(settings or {})}
    if config is not None:
        path = data_dir / "arvis.toml"
        path.write_text(config)
        overrides["config"] = path
    settings = app_settings(database_url, data_dir, **overrides)
    tokens = await mint_keys(database_url)
    app = create_app(
        functools.partial(build_kernel, settings, tracing=tracing),
        max_body_bytes=max_body_bytes,
        fast_lane=fast_lane,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
            yield Api(app=app, client=client, database_url=database_url, tokens=tokens)

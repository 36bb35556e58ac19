"""The upstream MCP servers of one process, opened at start-up and closed at shutdown.

The SDK is imported only when ``arvis.toml`` declares a server, so a deployment
without one pays nothing for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import httpx

from arvis.tools.base import Tool
from arvis.tools.mcp.config import McpServerConfig

if TYPE_CHECKING:
    from arvis.tools.mcp.tools import EgressCheck, MetaInjector
    from arvis.tools.mcp.upstream import UpstreamServer


class McpUpstreams:
    """Every declared server's session and the tools listed from it."""

    def __init__(
        self, servers: Sequence[UpstreamServer], tools: Mapping[str, Sequence[Tool]]
    ) -> None:
        self.servers = list(servers)
        self.tools: Mapping[str, Sequence[Tool]] = dict(tools)
        """Server name → its tools, sorted by name; empty for a left-out optional server."""

    @classmethod
    def empty(cls) -> McpUpstreams:
        return cls([], {})

    @classmethod
    async def open(
        cls,
        configs: Sequence[McpServerConfig],
        environ: Mapping[str, str],
        *,
        inject: MetaInjector | None = None,
        egress_scopes: Sequence[Sequence[str]] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> McpUpstreams:
        """Start the servers and read their tool lists (see ``arvis.tools.mcp.tools.open_servers``).

        With ``egress_scopes`` (the egress host patterns of each tenant's policy, and
        of the default), a ``url`` server whose host no scope allows stops start-up
        before anything is sent to it. ``http`` is the host's client, which asks the
        identity provider for the per-user tokens of servers with ``auth``.
        """
        if not configs:
            return cls.empty()
        from arvis.tools.mcp.tools import open_servers

        egress = None if egress_scopes is None else reachable(egress_scopes)
        servers, tools = await open_servers(
            configs, environ, inject=inject, egress=egress, http=http
        )
        return cls(servers, tools)

    async def aclose(self) -> None:
        """Stop every session: a stdio child is asked to exit, then killed."""
        await asyncio.gather(*(server.aclose() for server in self.servers))


def reachable(egress_scopes: Sequence[Sequence[str]]) -> EgressCheck:
    """Whether the egress rules of some tenant (a section of its own, or the default
    every other tenant gets) let a call reach a normalised host."""
    from arvis.domain.egress import host_allowed, normalised_patterns

    scopes = [normalised_patterns(patterns) for patterns in egress_scopes]
    return lambda host: any(host_allowed(host, patterns) for patterns in scopes)

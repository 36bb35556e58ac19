"""The upstream MCP servers of one process, opened at start-up and closed at shutdown.

The SDK is imported only when ``arvis.toml`` declares a server, so a deployment
without one pays nothing for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from arvis.tools.base import Tool
from arvis.tools.mcpconfig import McpServerConfig

if TYPE_CHECKING:
    from arvis.mcp.tools import MetaInjector
    from arvis.mcp.upstream import UpstreamServer


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
    ) -> McpUpstreams:
        """Start the servers and read their tool lists (see ``arvis.mcp.tools.open_servers``)."""
        if not configs:
            return cls.empty()
        from arvis.mcp.tools import open_servers

        servers, tools = await open_servers(configs, environ, inject=inject)
        return cls(servers, tools)

    async def aclose(self) -> None:
        """Stop every session: a stdio child is asked to exit, then killed."""
        await asyncio.gather(*(server.aclose() for server in self.servers))

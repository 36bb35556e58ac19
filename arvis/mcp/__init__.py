"""The MCP gateway (DESIGN §9): ARVIS as an MCP server, upstream MCP servers as tools.

- :mod:`arvis.mcp.endpoint` — the ``/mcp`` route: key, role, method; loads the gateway.
- :mod:`arvis.mcp.server` — the gateway: every ``tools/call`` is one ``tool.execute``.
- :mod:`arvis.mcp.answers` — a syscall's answer as a ``CallToolResult``.
- :mod:`arvis.mcp.meta` — the ``arvis.dev/*`` ``_meta`` keys, default ids, request state.
- :mod:`arvis.tools.mcpconfig` — ``[[tools.mcp]]`` entries (no SDK import).
- :mod:`arvis.mcp.upstream` — one pooled, supervised session per upstream server.
- :mod:`arvis.mcp.tools` — the upstream's tools as governed tools.
- :mod:`arvis.mcp.pool` — every declared upstream, opened at start-up, closed at shutdown.

Nothing is imported here: the tool registry reads :mod:`arvis.tools.mcpconfig`, and
the app mounts :mod:`arvis.mcp.endpoint`, without loading the SDK.
"""

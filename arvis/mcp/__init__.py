"""The MCP gateway (DESIGN §9): ARVIS as an MCP server, upstream MCP servers as tools.

- :mod:`arvis.mcp.server` — ``/mcp``: every ``tools/call`` is one ``tool.execute``.
- :mod:`arvis.mcp.answers` — a syscall's answer as a ``CallToolResult``.
- :mod:`arvis.mcp.meta` — the ``arvis.dev/*`` ``_meta`` keys, default ids, request state.
- :mod:`arvis.mcp.config` — ``[[tools.mcp]]`` entries (no SDK import).
- :mod:`arvis.mcp.upstream` — one pooled, supervised session per upstream server.
- :mod:`arvis.mcp.tools` — the upstream's tools as governed tools.

Nothing is imported here: the tool registry reads :mod:`arvis.mcp.config`
without loading the SDK or the HTTP layer.
"""

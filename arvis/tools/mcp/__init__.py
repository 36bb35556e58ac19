"""Upstream MCP servers as a tool kind (DESIGN §3, §9), beside the HTTP tool kind.

- :mod:`arvis.tools.mcp.config` — ``[[tools.mcp]]`` entries (no SDK import).
- :mod:`arvis.tools.mcp.upstream` — one pooled, supervised session per upstream server.
- :mod:`arvis.tools.mcp.tools` — the upstream's tools as governed tools.
- :mod:`arvis.tools.mcp.pool` — every declared upstream, opened at start-up, closed at shutdown.
- :mod:`arvis.tools.mcp.keys` — the ``arvis.dev/*`` ``_meta`` keys ARVIS speaks on MCP.

Nothing is imported here: the tool registry reads :mod:`arvis.tools.mcp.config`
without loading the SDK.
"""

"""The MCP gateway (DESIGN §9): ARVIS as an MCP server at ``/mcp``.

- :mod:`arvis.mcp.endpoint` — the ``/mcp`` route: key, role, method; loads the gateway.
- :mod:`arvis.mcp.server` — the gateway: every ``tools/call`` is one ``tool.execute``.
- :mod:`arvis.mcp.answers` — a syscall's answer as a ``CallToolResult``.
- :mod:`arvis.mcp.meta` — default ids and request state over the ``_meta`` keys.

Upstream MCP servers are a tool kind: :mod:`arvis.tools.mcp`.
"""

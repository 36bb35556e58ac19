"""The hostile modes, and the schemas of the stubs' tools (no MCP import: the application
factory, which every ARVIS process of a deployment loads, needs only these).

A *mode* names how a stub answers after it has performed its effect. Each stub offers
one tool (or, for the HTTP tool kind, one endpoint path) per mode, so a cell of the
suite is one tool name: ``web.status_404``, ``remote.jsonrpc_-32602``, ``stdio.die``.

Every tool takes ``{"token": "..."}``: the stub writes the token into its effect log
before answering, so a test counts how often the body ran for its own cell.
"""

from __future__ import annotations

from typing import Any

IDEMPOTENCY_KEY = "arvis.dev/idempotency_key"

TRANSPORT_MODES = (
    "status_202",
    "redirect_307",
    "status_404",
    "status_400",
    "status_500",
    "html_200",
    "malformed_json",
    "hang",
    "reset",
)
"""Answers of an HTTP endpoint after it read the request and acted."""

JSONRPC_ERRORS = {
    "jsonrpc_-32700": -32700,  # parse error
    "jsonrpc_-32600": -32600,  # invalid request
    "jsonrpc_-32601": -32601,  # method not found
    "jsonrpc_-32602": -32602,  # invalid params
    "jsonrpc_-32603": -32603,  # internal error
}
"""A JSON-RPC error answered to a ``tools/call`` the server has already acted on."""

MCP_HTTP_MODES = (*TRANSPORT_MODES, *JSONRPC_ERRORS, "is_error")
STDIO_MODES = (*JSONRPC_ERRORS, "is_error", "die", "hang")

BACKTRACKING = "^(a+)+$"
"""A pattern Python's backtracking ``re`` needs 2**n steps for on ``"a" * n + "!"``."""
BACKTRACKING_TEXT = "a" * 40 + "!"

TOKEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"token": {"type": "string", "maxLength": 200}},
    "required": ["token"],
}
HOSTILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "pattern": BACKTRACKING}},
    "required": ["text"],
}

"""The hostile modes, and what the MCP stubs list.

A *mode* names how a stub answers after it has performed its effect. Each stub offers
one tool (or, for the HTTP tool kind, one endpoint path) per mode, so a cell of the
suite is one tool name: ``web.status_404``, ``remote.jsonrpc_-32602``, ``stdio.die``.

Every tool takes ``{"token": "..."}``: the stub writes the token into its effect log
before answering, so a test counts how often the body ran for its own cell.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.rawhttp import Request, reset, respond

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
    "jsonrpc_-32700": types.PARSE_ERROR,
    "jsonrpc_-32600": types.INVALID_REQUEST,
    "jsonrpc_-32601": types.METHOD_NOT_FOUND,
    "jsonrpc_-32602": types.INVALID_PARAMS,
    "jsonrpc_-32603": types.INTERNAL_ERROR,
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


def listed_tools(modes: tuple[str, ...]) -> list[types.Tool]:
    """One tool per mode, ``ok`` (answers a result), ``read`` (a name other tool kinds
    also have, for start-up's collision checks) and ``backtrack`` (a hostile schema)."""
    tools = [
        types.Tool(name=mode, description=f"Act, then answer: {mode}.", input_schema=TOKEN_SCHEMA)
        for mode in (*modes, "ok", "read")
    ]
    tools.append(
        types.Tool(
            name="backtrack", description="A schema with a pattern.", input_schema=HOSTILE_SCHEMA
        )
    )
    return tools


def mcp_server(name: str, modes: tuple[str, ...], effects: EffectLog) -> Server[Any]:
    """An SDK server whose tools act, then answer as their mode says (the JSON-RPC
    errors, ``is_error``, ``die``, ``hang``; transport modes are the HTTP front's)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed_tools(modes))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        effects.record(
            params.name, arguments.get("token"), dict(params.meta or {}).get(IDEMPOTENCY_KEY)
        )
        if params.name in JSONRPC_ERRORS:
            raise MCPError(code=JSONRPC_ERRORS[params.name], message="refused (after acting)")
        if params.name == "is_error":
            return types.CallToolResult(
                content=[types.TextContent(text="it went wrong (after acting)")], is_error=True
            )
        if params.name == "die":
            os._exit(1)
        if params.name == "hang":
            await asyncio.sleep(3600)
        return types.CallToolResult(
            content=[types.TextContent(text="done")], structured_content={"done": params.name}
        )

    return Server(name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def answer_hostile(mode: str, writer: asyncio.StreamWriter, hang: asyncio.Event) -> None:
    """Answer a request (already read and acted on) the way ``mode`` says."""
    json_type = {"Content-Type": "application/json"}
    if mode == "status_202":
        await respond(writer, 202)
    elif mode == "redirect_307":
        await respond(writer, 307, headers={"Location": "http://127.0.0.1:9/elsewhere"})
    elif mode in ("status_404", "status_400", "status_500"):
        await respond(writer, int(mode[-3:]), b'{"error": "no"}', json_type)
    elif mode == "html_200":
        await respond(
            writer, 200, b"<html><body>Welcome</body></html>", {"Content-Type": "text/html"}
        )
    elif mode == "malformed_json":
        await respond(writer, 200, b'{"value": {"done": tr', json_type)
    elif mode == "hang":
        await hang.wait()
    elif mode == "reset":
        reset(writer)
    else:
        raise AssertionError(f"no transport mode {mode!r}")


def tool_call(request: Request) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """The tool name, arguments and ``_meta`` of a ``tools/call`` POST, else None."""
    if request.method != "POST":
        return None
    try:
        message = request.json()
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params") or {}
    return str(params.get("name")), params.get("arguments") or {}, params.get("_meta") or {}

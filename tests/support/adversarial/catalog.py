"""What the MCP stubs list and how every stub answers after acting (the modes are
:mod:`.modes`)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.modes import (
    HOSTILE_SCHEMA,
    IDEMPOTENCY_KEY,
    JSONRPC_ERRORS,
    TOKEN_SCHEMA,
)
from tests.support.adversarial.rawhttp import Request, reset, respond


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

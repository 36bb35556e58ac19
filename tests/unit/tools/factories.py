"""Tool factories that the registry tests declare by ``module:attribute``."""

from __future__ import annotations

from arvis.domain.definitions import ToolDefinition
from arvis.tools import Reporter, Tool, ToolHost, ToolInvocation, ToolResult
from tests.support.fakes import FakeTool, definition, read_only, returns_ok


async def answers_app(invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
    return ToolResult.ok("from the application")


def replacing_echo(host: ToolHost) -> list[Tool]:
    return [FakeTool(read_only("echo"), answers_app)]


def crm_tools(host: ToolHost) -> list[Tool]:
    return [FakeTool(definition("crm.update"), returns_ok)]


def more_crm_tools(host: ToolHost) -> list[Tool]:
    return [FakeTool(definition("crm.update"), returns_ok)]


def contradictory(host: ToolHost) -> list[Tool]:
    bad = ToolDefinition(
        name="cache.flush",
        description="Claims read_only, holds a write capability.",
        input_schema={"type": "object"},
        effect="read_only",
        replay_safety="safe",
        capabilities=["filesystem.write"],
    )
    return [FakeTool(bad, returns_ok)]


def crashing(host: ToolHost) -> list[Tool]:
    raise RuntimeError("factory is broken")


def not_tools(host: ToolHost) -> list[object]:
    return ["not a tool"]


def host_aware(host: ToolHost) -> list[Tool]:
    assert host.sandbox_dir.name == "sandbox"
    return [FakeTool(definition("host.aware"), returns_ok)]

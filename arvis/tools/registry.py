"""Declared tools (DESIGN §3): ``arvis.toml`` names factories; nothing is scanned.

```toml
[tools]
factories = ["myapp.tools:make_tools"]   # each gets a ToolHost, returns tools
builtins = true                          # echo, files.* as fallbacks
```

``[[tools.http]]`` entries are remote HTTP tools (:mod:`arvis.tools.http`);
``[[tools.mcp]]`` entries are upstream MCP servers (:mod:`arvis.tools.mcp.config`),
whose tools need a live session to be listed: the composition root opens them
first (``arvis.deployment.load_tools``) and hands their tools in through
:attr:`ToolHost.mcp_tools`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import ArvisError, ConfigurationError, DefinitionError
from arvis.domain.loading import is_attribute_spec, load_attribute
from arvis.domain.schemas import unsupported
from arvis.domain.sections import parse_section
from arvis.tools.base import Tool
from arvis.tools.builtins import builtin_tools
from arvis.tools.http import HttpToolConfig, http_tool
from arvis.tools.mcp.config import McpServerConfig


@dataclass(frozen=True)
class ToolHost:
    """What a tool factory receives: host dependencies, injected, never looked up.

    The composition root (:mod:`arvis.bootstrap`) builds it from the deployment's
    settings; the tool layer itself never reads settings or the environment.
    """

    sandbox_dir: Path
    """The only directory the built-in ``files.*`` tools touch (``$ARVIS_DATA_DIR/sandbox``)."""
    http: httpx.AsyncClient
    """Shared client; the host owns and closes it."""
    credentials: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Named secrets the deployment hands to its tools."""
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The process environment, injected by the composition root; ``headers_env``
    of ``[[tools.http]]`` reads it. Empty unless the host is given one."""
    mcp_tools: Mapping[str, Sequence[Tool]] = field(default_factory=dict)
    """The tools of each ``[[tools.mcp]]`` server, by server name, listed from its
    live session before the tool set is built (empty for a left-out optional one)."""


class ToolsConfig(BaseModel):
    """The ``[tools]`` section of ``arvis.toml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    factories: list[str] = Field(default_factory=list)
    """``"package.module:factory"`` entries, called in order with a :class:`ToolHost`."""
    builtins: bool = True
    """Offer ``echo`` and ``files.*`` where no application tool takes their name."""
    http: list[HttpToolConfig] = Field(default_factory=list)
    """Remote HTTP tools (``[[tools.http]]``)."""
    mcp: list[McpServerConfig] = Field(default_factory=list)
    """Upstream MCP servers (``[[tools.mcp]]``); their tools are ``<name>.<tool>``."""


ToolFactory = Callable[[ToolHost], Iterable[Tool]]


def parse_tools_config(raw: Mapping[str, Any]) -> ToolsConfig:
    """Validate ``[tools]``; a bad entry stops start-up with one line naming it."""
    config = parse_section(ToolsConfig, raw, "[tools]")
    for spec in config.factories:
        if not is_attribute_spec(spec):
            raise ConfigurationError(f"[tools] factory {spec!r} must be 'package.module:factory'")
    servers = [entry.name for entry in config.mcp]
    for name in servers:
        if servers.count(name) > 1:
            raise ConfigurationError(f"[[tools.mcp]] {name!r} is declared twice")
    return config


def load_factory(spec: str) -> ToolFactory:
    """Import ``package.module:attr`` — exactly the module named, nothing scanned."""
    factory: ToolFactory = load_attribute(spec, f"[tools] factory {spec!r}", callable_only=True)
    return factory


def call_factory(spec: str, factory: ToolFactory, host: ToolHost) -> list[Tool]:
    """Call one factory and check what it returned."""
    try:
        tools = list(factory(host))
    except DefinitionError as exc:
        raise DefinitionError(exc.tool, f"{exc.rule} (declared by factory {spec!r})") from exc
    except ArvisError:
        raise
    except Exception as exc:  # start-up boundary: the operator sees the text
        raise ConfigurationError(f"[tools] factory {spec!r} failed: {exc!r}") from exc
    for tool in tools:
        check_tool(tool, spec)
    return tools


def check_tool(tool: object, source: str) -> None:
    """A tool must be ``name + ToolDefinition + execute`` with matching names."""
    if not isinstance(tool, Tool):
        raise ConfigurationError(f"{source}: {tool!r} is not a tool (name, definition, execute)")
    if not isinstance(tool.definition, ToolDefinition):
        raise DefinitionError(str(tool.name), f"definition must be a ToolDefinition ({source})")
    if tool.name != tool.definition.name:
        raise DefinitionError(
            str(tool.name),
            f"tool name differs from its definition's name {tool.definition.name!r} ({source})",
        )


BUILTIN_SOURCE = "the built-in tools"


def build_tool_set(section: Mapping[str, Any], host: ToolHost) -> list[Tool]:
    """The tools the ``[tools]`` section declares: built-in fallbacks, then declared
    application tools replacing them by name.

    Built-in, application, HTTP and upstream MCP tools share one namespace (DESIGN
    §10 "Names are unique"). Only an application factory may replace a built-in of
    the same name (DESIGN §3); any other collision — two declared tools of one
    name, or an HTTP or upstream MCP tool taking a built-in's name — stops
    start-up with one line naming both sources. So does an input schema that
    cannot be checked in bounded time (:mod:`arvis.domain.schemas`). The result
    is sorted by name.
    """
    config = parse_tools_config(section)
    fallbacks = (
        {tool.name: tool for tool in builtin_tools(host.sandbox_dir)} if config.builtins else {}
    )
    declared: dict[str, tuple[str, Tool]] = {}
    # (source, its tools, whether it may replace a built-in of the same name)
    sources: list[tuple[str, list[Tool], bool]] = [
        (f"factory {spec!r}", call_factory(spec, load_factory(spec), host), True)
        for spec in config.factories
    ]
    for index, entry in enumerate(config.http, start=1):
        source = f"[[tools.http]] #{index}"
        remote = http_tool(entry, host.http, source=source, environ=host.environ)
        sources.append((source, [remote], False))
    for server in config.mcp:
        source = f"[[tools.mcp]] {server.name!r}"
        if server.name not in host.mcp_tools:
            raise ConfigurationError(
                f"{source}: the server was not opened before the tool set was built "
                "(arvis.deployment.load_tools opens it)"
            )
        listed = list(host.mcp_tools[server.name])
        for tool in listed:
            check_tool(tool, source)
        sources.append((source, listed, False))
    for source, tools, replaces in sources:
        for tool in tools:
            first = declared[tool.name][0] if tool.name in declared else None
            if first is None and tool.name in fallbacks and not replaces:
                first = BUILTIN_SOURCE
            if first is not None:
                raise ConfigurationError(
                    f"tool {tool.name!r} is declared by both {first} and {source}: tool names "
                    "are one namespace, and only an application factory may replace a built-in"
                )
            declared[tool.name] = (source, tool)
    merged: dict[str, tuple[str, Tool]] = {
        name: (BUILTIN_SOURCE, tool) for name, tool in fallbacks.items()
    }
    merged.update(declared)
    for source, tool in merged.values():
        # DESIGN §10 "Nothing on the event loop runs unbounded": refused here, not per call.
        reason = unsupported(tool.definition)
        if reason is not None:
            raise DefinitionError(tool.name, f"{reason} (declared by {source})")
    return [merged[name][1] for name in sorted(merged)]

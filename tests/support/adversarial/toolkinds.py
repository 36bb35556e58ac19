"""TOOL_KINDS: one row per kind of tool ARVIS governs.

A row says how the kind is declared in ``arvis.toml``, which hostile modes its stub
answers after acting (``hostile``), which modes legitimately never reach it
(``controls``: the positive controls of "not-started needs proof"), where its effects
are counted, how it declares a tool of a given name (start-up's collision cells) and a
tool with a backtracking schema. A new tool kind is one more row here; every rule of
tests/adversarial then runs against it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.factories import SPEC as APP_FACTORY
from tests.support.adversarial.modes import (
    HOSTILE_SCHEMA,
    MCP_HTTP_MODES,
    STDIO_MODES,
    TOKEN_SCHEMA,
    TRANSPORT_MODES,
)
from tests.support.adversarial.stubs import HostileStubs
from tests.support.adversarial.toml import table

TIMEOUT_S = 2.0
"""Every remote kind's per-call timeout: a ``hang`` cell costs this much.

It also bounds how soon a loaded machine must get the call's request out: at 0.5 s a
busy CI host once timed a ``tools/call`` out before its POST left ARVIS (the SDK then
cancels the POST), so the stub never acted, ARVIS rightly journaled the outcome as
uncertain, and a cell that needs the stub to act failed for want of an effect."""

Poster = Callable[[str, dict[str, Any]], Any]
"""Posts one decision (tool, payload) through the cell's entry point; used by arrangements."""


@dataclass(frozen=True)
class ToolKind:
    name: str
    prefix: str
    """Its tools are ``<prefix><mode>`` in the plan."""
    hostile: tuple[str, ...] = ()
    """Modes in which its stub acts and then answers badly: the far side answered."""
    controls: tuple[str, ...] = ()
    """Modes in which ARVIS can show nothing reached the tool."""
    factories: tuple[str, ...] = ()
    """``[tools] factories`` entries the kind needs."""
    declare: Callable[[HostileStubs], str] = lambda stubs: ""
    """Its ``[[tools.*]]`` declarations in the shared deployment."""
    effects: Callable[[HostileStubs, Path], EffectLog] | None = None
    """Where its effects are counted (stubs, deployment data dir)."""
    backtracking_tool: str | None = None
    """Its tool whose input schema has a backtracking pattern, if it can have one."""
    declare_read: Callable[[HostileStubs, str], str] | None = None
    """TOML declaring a tool named ``<server>.read`` (the server, its first segment, is the
    argument); the built-ins have one as ``files.read``, the app kind by ``named_env``."""
    source_words: Callable[[str], Sequence[str]] = lambda server: ()
    """Words of which one names this source in a start-up error about ``<server>.read``."""
    named_env: Callable[[str], dict[str, str]] = lambda server: {}
    """The environment ``declare_read`` needs (the app factory reads its tool's name)."""
    arrange: Callable[[str, HostileStubs, Poster], Any] | None = None
    """For a control mode: an async context manager that makes the call unreachable."""
    control_tools: dict[str, str] = field(default_factory=dict)
    """The tool a control mode posts, where it is not ``<prefix><mode>``."""
    sample: str | None = None
    """The hostile mode the cells that cross it with every entry point use."""

    def __repr__(self) -> str:
        return f"ToolKind({self.name})"

    def tool(self, mode: str) -> str:
        return f"{self.prefix}{mode}"

    def effect_count(self, stubs: HostileStubs, data_dir: Path, token: str) -> int:
        """How many times one of its tools acted for ``token`` (in any ARVIS process)."""
        if self.effects is None:
            raise AssertionError(f"the {self.name} kind counts no effects")
        return self.effects(stubs, data_dir).count(token)

    def payload(self, token: str) -> dict[str, Any]:
        return {"token": token}


def http_tool_toml(name: str, url: str, schema: dict[str, Any] = TOKEN_SCHEMA) -> str:
    """One ``[[tools.http]]`` entry: a mutating, unsafe endpoint at ``url``."""
    return table(
        "[[tools.http]]",
        {
            "name": name,
            "description": f"A hostile HTTP endpoint ({name}).",
            "url": url,
            "effect": "mutating",
            "replay_safety": "unsafe",
            "input_schema": schema,
            "timeout_s": TIMEOUT_S,
        },
    )


def _declare_http(stubs: HostileStubs) -> str:
    tools = [
        http_tool_toml(f"web.{mode}", stubs.http_url(mode)) for mode in (*TRANSPORT_MODES, "ok")
    ]
    tools.append(http_tool_toml("web.refused", stubs.refused_url))
    tools.append(http_tool_toml("web.backtrack", stubs.http_url("ok"), HOSTILE_SCHEMA))
    return "\n".join(tools)


def terms_tools(stubs: HostileStubs) -> str:
    """``terms.group`` and ``terms.quorum``: endpoints that answer 500 after acting (an
    uncertain outcome), which the shared policy gives consent terms."""
    return "\n".join(
        http_tool_toml(name, stubs.http_url("status_500"))
        for name in ("terms.group", "terms.quorum")
    )


def _mcp_server(name: str, where: dict[str, Any]) -> str:
    return table(
        "[[tools.mcp]]", {"name": name, **where, "timeout_s": TIMEOUT_S, "startup_timeout_s": 10}
    )


def _stdio(stubs: HostileStubs, name: str = "stdio") -> str:
    return _mcp_server(name, {"command": stubs.stdio_command})


def _remote(stubs: HostileStubs, name: str = "remote") -> str:
    return _mcp_server(name, {"url": stubs.mcp_url})


@asynccontextmanager
async def _unstartable(mode: str, stubs: HostileStubs, post: Poster) -> AsyncIterator[None]:
    """The stdio child dies, and cannot be started again until the block ends."""
    await post("stdio.die", {"token": f"kill-before-{mode}"})
    marker = stubs.stdio_state / "refuse"
    marker.write_text("the server cannot start now")
    try:
        yield
    finally:
        marker.unlink()


@asynccontextmanager
async def _unreachable(mode: str, stubs: HostileStubs, post: Poster) -> AsyncIterator[None]:
    """The MCP server's session is open, but a new connection to it hangs before it is made:
    the call's POST cannot leave ARVIS before the call times out."""
    with stubs.mcp_unreachable():
        yield


@asynccontextmanager
async def _nothing(mode: str, stubs: HostileStubs, post: Poster) -> AsyncIterator[None]:
    yield


BUILTIN = ToolKind(
    name="builtin",
    prefix="files.",
    declare_read=lambda stubs, server: "",
    source_words=lambda server: ("built-in", "builtin"),
)
APP = ToolKind(
    name="app",
    prefix="app.",
    hostile=("raise_untyped",),
    sample="raise_untyped",
    factories=(APP_FACTORY,),
    effects=lambda stubs, data_dir: EffectLog(data_dir / "app-effects.jsonl"),
    backtracking_tool="app.backtrack",
    declare_read=lambda stubs, server: "",
    named_env=lambda server: {"ADVERSARIAL_APP_TOOL": f"{server}.read"},
    source_words=lambda server: (APP_FACTORY, "tests.support.adversarial.factories"),
)
HTTP = ToolKind(
    name="http",
    prefix="web.",
    hostile=TRANSPORT_MODES,
    sample="status_404",
    controls=("refused",),
    declare=_declare_http,
    effects=lambda stubs, data_dir: stubs.http_effects,
    backtracking_tool="web.backtrack",
    declare_read=lambda stubs, server: http_tool_toml(f"{server}.read", stubs.http_url("ok")),
    source_words=lambda server: ("[[tools.http]]", "tools.http"),
    arrange=_nothing,
)
MCP_STDIO = ToolKind(
    name="mcp-stdio",
    prefix="stdio.",
    hostile=STDIO_MODES,
    controls=("unstartable",),
    declare=_stdio,
    effects=lambda stubs, data_dir: stubs.stdio_effects,
    backtracking_tool="stdio.backtrack",
    declare_read=lambda stubs, server: _stdio(stubs, server),
    source_words=lambda server: (f"[[tools.mcp]] {server!r}", f"tools.mcp {server!r}"),
    arrange=_unstartable,
    control_tools={"unstartable": "stdio.ok"},
    sample="jsonrpc_-32602",
)
MCP_HTTP = ToolKind(
    name="mcp-http",
    prefix="remote.",
    hostile=MCP_HTTP_MODES,
    sample="status_202",
    controls=("unreachable",),
    arrange=_unreachable,
    control_tools={"unreachable": "remote.ok"},
    declare=_remote,
    effects=lambda stubs, data_dir: stubs.mcp_http_effects,
    backtracking_tool="remote.backtrack",
    declare_read=lambda stubs, server: _remote(stubs, server),
    source_words=lambda server: (f"[[tools.mcp]] {server!r}", f"tools.mcp {server!r}"),
)

TOOL_KINDS: tuple[ToolKind, ...] = (BUILTIN, APP, HTTP, MCP_STDIO, MCP_HTTP)
"""Every tool kind. Add a row to govern a new kind by every rule of the suite."""


def control_tool(kind: ToolKind, mode: str) -> str:
    """The tool a control cell posts: its own ``<prefix><mode>``, unless the kind says."""
    return kind.control_tools.get(mode, kind.tool(mode))

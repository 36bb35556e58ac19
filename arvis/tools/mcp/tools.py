"""Tools of upstream MCP servers, governed like any other (DESIGN §3).

**Definitions.** Each tool an upstream lists at start-up becomes
``<server>.<tool>`` with the server's description and input schema. Its
governance metadata is the operator's: without an override and without
``trust_annotations`` it is the most conservative kind (``mutating``,
``unsafe``, no capability tags). With trust, ``readOnlyHint: true`` is
``read_only``/``safe``, else ``idempotentHint: true`` is ``idempotent`` and
anything else ``unsafe``; ``openWorldHint: true`` adds ``network.access``. A
hint the server leaves out asserts nothing. An override's fields always win;
a contradiction stops start-up naming the tool.

**Per-user credentials.** A server with ``auth`` gets each call on a session of the
caller's own, sent with the caller's token exchanged for the server's audience
(:mod:`arvis.tools.mcp.callers`); a failed exchange is refused before anything is sent:
``EFFECT_NOT_STARTED``, ``credential_exchange_failed``.

**A call.** The frozen payload is the arguments; ``_meta`` carries
``arvis.dev/idempotency_key`` and ``arvis.dev/call_id``, and when tracing is on
``traceparent`` (and ``tracestate``): the server's spans continue the syscall's
trace (docs/telemetry.md). Boundaries:

- nothing sent (the server could not be started, its connection was refused,
  or it now lists the tool differently from the plan): ``EFFECT_NOT_STARTED``;
- any JSON-RPC error — the server's own, or one the SDK's client made up from an
  HTTP answer it could not read (a 202, a redirect, a 404, a page, a 5xx, a body
  that is not JSON) —, a timeout, a dropped connection, a malformed result:
  the request reached the server, which may have acted before it answered, so
  ``EFFECT_STATE_UNKNOWN`` (DESIGN §10 "Not-started needs proof";
  ``EFFECT_NOT_STARTED`` for a read-only tool, which has nothing to start);
- a JSON-RPC error whose code the operator declared in ``not_started_codes``
  for the tool: a ``upstream_rejected`` problem whose effect did not start;
- ``isError: true``: ``EFFECT_FAILED``, retry advised only for a tool that is
  not replay-unsafe (whether the effect started is unknown);
- a result: ``EFFECT_COMPLETED`` with ``structuredContent`` (else the content
  blocks) as the value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import mcp_types as types
from mcp import MCPError
from pydantic import JsonValue, ValidationError

from arvis.domain.definitions import (
    MAX_DESCRIPTION_CHARS,
    Effect,
    ReplaySafety,
    ToolDefinition,
)
from arvis.domain.egress import egress_host
from arvis.domain.errors import ConfigurationError, DefinitionError
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.credentials import ExchangeFailed, TokenExchanger, caller_key, token_exchanger
from arvis.tools.mcp.callers import Caller
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.keys import CALL_ID, IDEMPOTENCY_KEY
from arvis.tools.mcp.upstream import UpstreamChanged, UpstreamServer, UpstreamUnavailable
from arvis.tools.remote import MCP_KIND, RemoteOutcomes, read_env_headers

log = logging.getLogger(__name__)

MetaInjector = Callable[[dict[str, Any]], None]
"""Writes the current trace context into a call's ``_meta`` (``traceparent``)."""

EgressCheck = Callable[[str], bool]
"""Whether some tenant's egress rules let a call reach this (normalised) host."""


def derive_definition(config: McpServerConfig, listed: types.Tool) -> ToolDefinition:
    """The plan's definition of one listed tool (module rules); names the tool on error."""
    source = f"[[tools.mcp]] {config.name!r}"
    effect, safety, tags = Effect.MUTATING, ReplaySafety.UNSAFE, []
    hints = listed.annotations if config.trust_annotations else None
    if hints is not None:
        if hints.read_only_hint is True:
            effect, safety = Effect.READ_ONLY, ReplaySafety.SAFE
        elif hints.idempotent_hint is True:
            safety = ReplaySafety.IDEMPOTENT
        if hints.open_world_hint is True:
            tags = ["network.access"]
    override = config.overrides.get(listed.name)
    if override is not None:
        if override.effect is not None:
            effect = override.effect
            if override.replay_safety is None:
                # The derived safety belonged to the derived effect: keep what still fits.
                if effect is Effect.READ_ONLY:
                    safety = ReplaySafety.SAFE
                elif safety is ReplaySafety.SAFE:
                    safety = ReplaySafety.UNSAFE
        if override.replay_safety is not None:
            safety = override.replay_safety
        if override.capabilities is not None:
            tags = list(override.capabilities)
    description = (listed.description or listed.title or "").strip()
    if not description:
        description = f"Tool {listed.name!r} of the MCP server {config.name!r}."
    try:
        return ToolDefinition(
            name=f"{config.name}.{listed.name}",
            description=description[:MAX_DESCRIPTION_CHARS],
            input_schema=listed.input_schema,
            effect=effect,
            replay_safety=safety,
            capabilities=tags,
        )
    except DefinitionError as exc:
        raise DefinitionError(exc.tool, f"{exc.rule} (declared by {source})") from None


class McpTool:
    """A tool whose body is a ``tools/call`` on an upstream MCP server."""

    def __init__(
        self,
        definition: ToolDefinition,
        server: UpstreamServer,
        remote: str,
        inject: MetaInjector | None = None,
        exchanger: TokenExchanger | None = None,
    ) -> None:
        self.definition = definition
        self._server = server
        self._remote = remote
        self._inject = inject
        self._exchanger = exchanger
        self._outcomes = RemoteOutcomes(
            MCP_KIND, definition, server.config.declared_not_started(remote)
        )

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def destination(self) -> str | None:
        """A streamable HTTP server's endpoint: the egress gate checks its host."""
        return self._server.config.url

    def __repr__(self) -> str:
        return f"McpTool({self.name!r}, server={self._server.name!r})"

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        meta: dict[str, Any] = {
            IDEMPOTENCY_KEY: invocation.idempotency_key,
            CALL_ID: invocation.call_id,
        }
        if self._inject is not None:
            self._inject(meta)
        outcomes = self._outcomes
        caller = await self._caller(invocation)
        try:
            answer = await self._server.call(self._remote, invocation.payload.value, meta, caller)
        except UpstreamUnavailable as exc:
            raise outcomes.unreachable(invocation, exc.message) from None
        except UpstreamChanged as exc:
            changed = "upstream_changed"
            raise outcomes.not_sent(invocation, changed, exc.message, retryable=False) from None
        except MCPError as exc:
            # An answer, or the SDK's word for one it could not read: the call arrived.
            return outcomes.error_answer(invocation, exc.code, exc.error.message)
        except (TimeoutError, OSError) as exc:
            raise outcomes.no_answer(invocation, exc) from None
        except ValidationError:
            # A result that is not one of the protocol's: whatever the server did is unknown.
            raise outcomes.unknown(
                invocation, MCP_KIND.invalid, "the answer is not an MCP result"
            ) from None
        except RuntimeError:
            # The SDK's check of the answer against the tool's output schema.
            broken = "the answer breaks its schema"
            raise outcomes.failed(invocation, MCP_KIND.invalid, broken, retryable=False) from None
        return self._result(invocation, answer)

    async def _caller(self, invocation: ToolInvocation) -> Caller | None:
        """Who the call is sent for, with the caller's exchanged token (None without
        ``auth``); a failed exchange is refused here, before anything is sent."""
        if self._exchanger is None:
            return None
        try:
            bearer = await self._exchanger.bearer_for(invocation.context)
        except ExchangeFailed as failed:
            raise self._outcomes.exchange_failed(invocation, failed) from None
        return Caller(caller_key(invocation.context), bearer)

    def _result(self, invocation: ToolInvocation, answer: types.Result) -> ToolResult:
        outcomes = self._outcomes
        if not isinstance(answer, types.CallToolResult):
            # It asks for input ARVIS cannot give, after it may have begun: unknown.
            raise outcomes.unknown(invocation, "upstream_needs_input", "the server asked for input")
        if answer.is_error:
            raise outcomes.failed(
                invocation,
                "upstream_error",
                f"the tool reported an error: {_text(answer) or 'no detail'}",
                retryable=self.definition.replay_safety is not ReplaySafety.UNSAFE,
            )
        value: JsonValue
        if answer.structured_content is not None:
            value = answer.structured_content
        else:
            value = [
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                for block in answer.content
            ]
        try:
            return ToolResult.ok(value)
        except ValidationError:
            raise outcomes.failed(
                invocation,
                MCP_KIND.invalid,
                "the result cannot be journaled",
                retryable=False,
            ) from None


async def open_servers(
    configs: Sequence[McpServerConfig],
    environ: Mapping[str, str],
    *,
    inject: MetaInjector | None = None,
    egress: EgressCheck | None = None,
    http: httpx.AsyncClient | None = None,
) -> tuple[list[UpstreamServer], dict[str, Sequence[Tool]]]:
    """Start every server at once; the first that cannot be used stops start-up.

    An unreachable server stops start-up with one line naming it, unless it is
    ``optional``: then its tools are left out and a warning says so. On any
    failure every server started here is stopped again. ``inject`` writes the
    trace context into each call's ``_meta``. With ``egress``, a ``url`` server
    whose host no tenant may reach stops start-up before anything is sent to
    it (its every call would be refused by the egress gate anyway). ``http`` asks the
    identity provider for the exchanged tokens of the servers with ``auth``; one whose
    client secret is unset stops start-up before anything is sent to any server.
    """
    if egress is not None:
        for config in configs:
            _check_egress(config, egress)
    exchangers = {config.name: _exchanger(config, http, environ) for config in configs}
    servers = [UpstreamServer(config, _headers(config, environ)) for config in configs]
    listings = await asyncio.gather(*(server.start() for server in servers), return_exceptions=True)
    try:
        tools: dict[str, Sequence[Tool]] = {}
        for server, listing in zip(servers, listings, strict=True):
            tools[server.name] = _tools_of(server, listing, inject, exchangers[server.name])
    except BaseException:
        await asyncio.gather(*(server.aclose() for server in servers))
        raise
    return servers, tools


def _tools_of(
    server: UpstreamServer,
    listing: list[types.Tool] | BaseException,
    inject: MetaInjector | None,
    exchanger: TokenExchanger | None,
) -> list[Tool]:
    config = server.config
    if isinstance(listing, UpstreamUnavailable):
        if not config.optional:
            raise ConfigurationError(
                f"[[tools.mcp]] {config.name!r}: cannot use the server at start-up: "
                f"{listing.reason}"
            )
        log.warning(
            "[[tools.mcp]] %r is optional and unreachable; its tools are left out: %s",
            config.name,
            listing.reason,
        )
        return []
    if isinstance(listing, BaseException):
        raise listing
    by_name = {tool.name: tool for tool in listing}
    unknown = sorted(set(config.overrides) - set(by_name))
    if unknown:
        raise ConfigurationError(
            f"[[tools.mcp]] {config.name!r}: an override names {unknown[0]!r}, which the "
            f"server does not list (it lists {sorted(by_name) or 'no tools'})"
        )
    return [
        McpTool(derive_definition(config, by_name[name]), server, name, inject, exchanger)
        for name in sorted(by_name)
    ]


def _check_egress(config: McpServerConfig, egress: EgressCheck) -> None:
    if config.url is None:
        return
    host = egress_host(config.url)
    if host is None or not egress(host):
        shown = "its host" if host is None else f"its host {host}"
        raise ConfigurationError(
            f"[[tools.mcp]] {config.name!r}: {shown} is on no egress_hosts of [policy], so "
            "every call to it would be refused; nothing was sent to it (add the host to "
            "egress_hosts, or remove the server)"
        )


def _exchanger(
    config: McpServerConfig, http: httpx.AsyncClient | None, environ: Mapping[str, str]
) -> TokenExchanger | None:
    if config.auth is None:
        return None
    source = f"[[tools.mcp]] {config.name!r}"
    if http is None:
        raise ConfigurationError(f"{source}: auth needs the host's HTTP client")
    return token_exchanger(config.auth, http, what=source, environ=environ)


def _headers(config: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    source = f"[[tools.mcp]] {config.name!r}"
    return {**config.headers, **read_env_headers(source, config.headers_env, environ)}


def _text(answer: types.CallToolResult) -> str:
    parts = [block.text for block in answer.content if isinstance(block, types.TextContent)]
    return " ".join(" ".join(parts).split())

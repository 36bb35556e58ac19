"""``/mcp`` (DESIGN §7): ARVIS as an MCP server, over streamable HTTP.

The caller is authenticated by ``arvis.mcp.endpoint`` before anything here runs;
the key's tenant is the only one a request touches. ``tools/list`` answers the
current plan. Every ``tools/call`` is one ``tool.execute`` syscall through the
same :class:`SyscallHandler` as ``POST /v1/syscalls``: there is no second
lifecycle here, only translation (ids: :mod:`arvis.mcp.meta`; answers:
:mod:`arvis.mcp.answers`).

The transport is stateless and answers JSON: every POST stands alone, so any
worker or instance can answer it, and nothing here outlives a request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from arvis import __version__
from arvis.domain.authorization import DenialReason
from arvis.domain.decisions import ActionDecision
from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.errors import ArvisError, PayloadError
from arvis.domain.idempotency import derive_idempotency_key
from arvis.domain.identity import Identity
from arvis.domain.ids import CausalId, RunId
from arvis.domain.payload import FrozenEffectPayload, freeze_payload
from arvis.kernel import Kernel
from arvis.lifecycle.request import Syscall
from arvis.lifecycle.results import SyscallResult
from arvis.mcp.answers import (
    answer_meta,
    call_result,
    consent_request,
    consent_result,
    declined_result,
    empty_meta,
)
from arvis.mcp.meta import (
    InvalidIds,
    PendingDecision,
    default_causal_id,
    default_run_id,
    explicit_ids,
    trace_context,
)
from arvis.tools.mcp import keys
from arvis.web.identity import scope_log_fields
from arvis.web.problems import problem

_IDENTITY = "arvis_mcp_identity"
INSTRUCTIONS = (
    "Every tool call here is governed by ARVIS: it may be refused, may need an approver's "
    "consent, runs at most once per decision and is journaled. Answers carry arvis.dev/* keys "
    "in _meta. When a call says not to retry, do not retry it."
)


def approval_url(base_url: str, confirmation_id: str) -> str:
    """Where an approver acts on a confirmation: the console's page for it, which a person
    can open (the API's approve route is a POST for programs). ``base_url`` is the
    deployment's public address as configured (``[notify] base_url``), never one a
    request's ``Host`` header says: a link a model shows a person must point where the
    operator said."""
    return f"{base_url.rstrip('/')}/console/confirmations/{confirmation_id}"


def mcp_tool(definition: ToolDefinition) -> types.Tool:
    """A plan definition as ``tools/list`` shows it: never its fingerprint or the policy."""
    mutating = not definition.read_only
    return types.Tool(
        name=definition.name,
        description=definition.description,
        input_schema=definition.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=definition.read_only,
            destructive_hint=mutating and definition.replay_safety is ReplaySafety.UNSAFE,
            idempotent_hint=definition.replay_safety is not ReplaySafety.UNSAFE,
            open_world_hint="network.access" in definition.capabilities,
        ),
    )


class McpGateway:
    """MCP for one kernel: :meth:`running` must surround :meth:`handle`."""

    def __init__(self) -> None:
        self._kernel: Kernel | None = None
        self.server: Server[Any] = Server(
            "arvis",
            version=__version__,
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._transport: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self, kernel: Kernel) -> AsyncIterator[None]:
        """Serve MCP for ``kernel`` while the context is open.

        The SDK's transport runs in a task of its own: its task group must be left
        by the task that entered it, and an application's lifespan may be entered
        and left by different tasks (test harnesses do).
        """
        # The SDK's manager runs once: each serving life gets its own.
        transport = StreamableHTTPSessionManager(
            app=self.server, json_response=True, stateless=True
        )
        started, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with transport.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(serve(), name="mcp-gateway")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiting.cancel()
            await task  # it ended before serving: raise what ended it
            raise RuntimeError("the MCP transport stopped before it served")
        self._kernel, self._transport = kernel, transport
        try:
            yield
        finally:
            self._kernel = self._transport = None
            stop.set()
            await task

    async def handle(self, identity: Identity, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one MCP POST of an authenticated ``agent`` (see ``arvis.mcp.endpoint``)."""
        transport = self._transport
        if self._kernel is None or transport is None:
            await problem("shutting_down", "MCP is not being served")(scope, receive, send)
            return
        scope.setdefault("state", {})[_IDENTITY] = identity
        await transport.handle_request(scope, receive, send)

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        definition = self._plan_definitions().get(name)
        return None if definition is None else definition.input_schema

    def _plan_definitions(self) -> Mapping[str, ToolDefinition]:
        if self._kernel is None:
            return {}
        return self._kernel.lifecycle.plans.current.definitions

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        _caller(ctx)
        return types.ListToolsResult(
            tools=[mcp_tool(definition) for definition in self._plan_definitions().values()]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        request, identity = _caller(ctx)
        kernel = self._kernel
        if kernel is None:
            raise MCPError(code=types.INTERNAL_ERROR, message="ARVIS is shutting down")
        tool, arguments = params.name, params.arguments or {}
        try:
            payload = freeze_payload(arguments)
        except PayloadError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"arguments: {exc.message}") from None
        definition = kernel.lifecycle.plans.current.definitions.get(tool)
        try:
            run_id, causal_id, pending = _named_ids(params, request, tool, payload)
        except InvalidIds as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        if pending is not None and _declined(params.input_responses):
            return declined_result(
                _pending_meta(identity, pending, payload),
                tool=tool,
                confirmation_id=pending.confirmation_id,
            )
        run_id = run_id or default_run_id(identity, kernel.lifecycle.handler.served_run)
        causal_id = causal_id or default_causal_id(tool, definition, payload)
        try:
            decision = ActionDecision(tool=tool, payload=arguments)
        except ValidationError:
            # Not even a tool name: no decision can be formed, so none is journaled.
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {tool}") from None
        syscall = Syscall(
            name="tool.execute", run_id=run_id, causal_id=causal_id, decision=decision
        )
        with _caller_trace(kernel, params.meta, request):
            result = await self._execute(syscall, identity, kernel, request)
        if result.outcome == "refused" and result.reason == DenialReason.UNKNOWN_TOOL:
            # Journaled as a refusal by the handler; MCP answers it as a protocol error.
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {tool}",
                data={"_meta": answer_meta(result)},
            )
        if result.outcome == "confirmation_required":
            return self._consent(ctx, request, identity, kernel, result, tool, payload)
        return call_result(result, tool=tool, protocol_version=ctx.protocol_version)

    async def _execute(
        self, syscall: Syscall, identity: Identity, kernel: Kernel, request: Request
    ) -> SyscallResult:
        """The syscall through the one handler, which checks, counts and logs it; only
        its errors are translated here."""
        fields = scope_log_fields(request.scope)
        try:
            return await kernel.lifecycle.handler.handle(syscall, identity, log_fields=fields)
        except PayloadError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"arguments: {exc.message}") from None
        except ArvisError as exc:
            raise MCPError(
                code=types.INTERNAL_ERROR, message=exc.message, data={"code": exc.code}
            ) from None

    def _consent(
        self,
        ctx: ServerRequestContext[Any],
        request: Request,
        identity: Identity,
        kernel: Kernel,
        result: SyscallResult,
        tool: str,
        payload: FrozenEffectPayload,
    ) -> types.CallToolResult | types.InputRequiredResult:
        assert result.confirmation is not None
        url = approval_url(kernel.public_url, result.confirmation.id)
        approver = f"a principal with the approver role in tenant {identity.tenant_id!r}"
        if not kernel.lifecycle.consent.allow_self_approval:
            approver += " other than you"
        if not _elicits_urls(ctx):
            return consent_result(result, tool=tool, approval_url=url, approver=approver)
        state = PendingDecision(
            run_id=result.run_id,
            causal_id=result.causal_id,
            confirmation_id=result.confirmation.id,
            tool=tool,
            digest=payload.digest,
        )
        return consent_request(
            result, tool=tool, approval_url=url, approver=approver, state=state.encode()
        )


def _caller(ctx: ServerRequestContext[Any]) -> tuple[Request, Identity]:
    request = ctx.request
    identity = None if request is None else request.scope.get("state", {}).get(_IDENTITY)
    if not isinstance(request, Request) or not isinstance(identity, Identity):
        # Only reachable when the server is served without the gateway's endpoint.
        raise MCPError(code=types.INTERNAL_ERROR, message="the caller is not authenticated")
    return request, identity


def _caller_trace(
    kernel: Kernel, meta: Mapping[str, Any] | None, request: Request
) -> AbstractContextManager[object]:
    """The caller's trace, current meanwhile: ``_meta``'s (the MCP convention) wins
    over the request's headers; without it, the headers' as the HTTP app has them."""
    tracing = kernel.tracing
    if tracing is None:
        return nullcontext()
    carrier = trace_context(meta)
    if carrier is None:
        return tracing.continued_from_headers(request.scope["headers"])
    return tracing.continued(*carrier)


def _named_ids(
    params: types.CallToolRequestParams,
    request: Request,
    tool: str,
    payload: FrozenEffectPayload,
) -> tuple[str | None, str | None, PendingDecision | None]:
    """The run and causal ids the call names, and the decision its request state resumes.

    A resumed decision's ids win; ids the call names as well must be the same.
    """
    run_id, causal_id = explicit_ids(params.meta, request.headers)
    if params.request_state is None:
        return run_id, causal_id, None
    pending = PendingDecision.decode(params.request_state, tool=tool, payload=payload)
    if run_id not in (None, pending.run_id) or causal_id not in (None, pending.causal_id):
        raise InvalidIds("requestState belongs to another decision than the ids sent")
    return pending.run_id, pending.causal_id, pending


def _elicits_urls(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this client can be sent to a URL and retry (2026-07-28 input_required)."""
    capabilities = ctx.session.client_capabilities
    elicitation = None if capabilities is None else capabilities.elicitation
    return (
        ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        and elicitation is not None
        and elicitation.url is not None
    )


def _declined(responses: Mapping[str, Any] | None) -> bool:
    """The user said no (or dismissed it); a retry carrying only the state resumes."""
    answer = (responses or {}).get(keys.APPROVAL)
    return isinstance(answer, types.ElicitResult) and answer.action != "accept"


def _pending_meta(
    identity: Identity, pending: PendingDecision, payload: FrozenEffectPayload
) -> dict[str, Any]:
    key = derive_idempotency_key(
        identity.tenant_id,
        RunId(pending.run_id),
        CausalId(pending.causal_id),
        pending.tool,
        payload.digest,
    )
    return empty_meta(
        **{
            keys.OUTCOME: "confirmation_required",
            keys.IDEMPOTENCY_KEY: key,
            keys.RUN_ID: pending.run_id,
            keys.CAUSAL_ID: pending.causal_id,
            keys.CONFIRMATION_ID: pending.confirmation_id,
        }
    )

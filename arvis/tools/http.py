"""Remote HTTP tools (DESIGN §3): ARVIS POSTs the frozen invocation.

```toml
[[tools.http]]
name = "crm.update"
description = "Update a CRM record."
url = "https://crm.internal/arvis/update"
effect = "mutating"
replay_safety = "idempotent"
capabilities = ["network.access"]
input_schema = { type = "object" }
```

The request body is the JCS object ``{call_id, context, idempotency_key,
payload, tool}`` with an ``Idempotency-Key`` header. The endpoint answers a
tool result as JSON: ``{"value": ...}`` or ``{"problem": {code, detail,
effect_started}}``. A connect failure means the effect did not start; a
failure after the request may have been sent means nobody knows.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arvis.domain.canonical import canonical_bytes
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.errors import DefinitionError
from arvis.tools.base import Reporter, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError


class HttpToolConfig(BaseModel):
    """One ``[[tools.http]]`` entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    url: str = Field(pattern=r"^https?://")
    effect: Effect
    replay_safety: ReplaySafety
    capabilities: list[str] = Field(default_factory=list)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)


class HttpTool:
    """A tool whose body is an HTTP endpoint."""

    def __init__(
        self, definition: ToolDefinition, config: HttpToolConfig, client: httpx.AsyncClient
    ) -> None:
        self.definition = definition
        self._config = config
        self._client = client

    @property
    def name(self) -> str:
        return self.definition.name

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        context = invocation.context
        body = canonical_bytes(
            {
                "call_id": invocation.call_id,
                "context": {
                    "tenant_id": context.tenant_id,
                    "run_id": context.run_id,
                    "causal_id": context.causal_id,
                    "plan_id": context.plan_id,
                },
                "idempotency_key": invocation.idempotency_key,
                "payload": invocation.payload.value,
                "tool": invocation.tool,
            }
        )
        headers = {
            **self._config.headers,
            "Content-Type": "application/json",
            "Idempotency-Key": invocation.idempotency_key,
        }
        try:
            response = await self._client.post(
                self._config.url, content=body, headers=headers, timeout=self._config.timeout_s
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            raise self._error(
                invocation, False, True, "connect_failed", "could not connect"
            ) from None
        except httpx.HTTPError:
            # The request may have reached the endpoint: the effect is unknown.
            raise self._error(
                invocation, None, False, "remote_unknown", "no complete answer"
            ) from None
        return self._result(invocation, response)

    def _result(self, invocation: ToolInvocation, response: httpx.Response) -> ToolResult:
        status = response.status_code
        if 200 <= status < 300:
            try:
                return ToolResult.model_validate(response.json())
            except (ValueError, ValidationError):
                raise self._error(
                    invocation, True, False, "invalid_remote_response", "not a tool result"
                ) from None
        if status == 429 or (400 <= status < 500 and status != 409):
            # A client error is refused before processing, by HTTP's contract.
            return ToolResult.fail(
                "remote_rejected", f"the endpoint refused the call ({status})", effect_started=False
            )
        raise self._error(
            invocation, None, False, "remote_failed", f"the endpoint failed ({status})"
        )

    def _error(
        self,
        invocation: ToolInvocation,
        started: bool | None,
        retryable: bool,
        code: str,
        message: str,
    ) -> ToolExecutionError:
        if started is None and self.definition.read_only:
            started, retryable = False, True  # nothing to start: a read can be repeated
        if self.definition.replay_safety is ReplaySafety.UNSAFE:
            retryable = False  # the dispatcher refuses retry advice from unsafe tools
        return ToolExecutionError(
            invocation.call_id,
            effect_started=started,
            retryable=retryable,
            code=code,
            message=f"{self.name}: {message}",
        )


def http_tool(config: HttpToolConfig, client: httpx.AsyncClient, *, source: str) -> HttpTool:
    """Build one declared HTTP tool; a contradiction names the tool, the rule and the entry."""
    try:
        definition = ToolDefinition(
            name=config.name,
            description=config.description,
            input_schema=config.input_schema,
            effect=config.effect,
            replay_safety=config.replay_safety,
            capabilities=config.capabilities,
        )
    except DefinitionError as exc:
        raise DefinitionError(exc.tool, f"{exc.rule} (declared by {source})") from None
    return HttpTool(definition, config, client)

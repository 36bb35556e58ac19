"""Remote HTTP tools (DESIGN §3): ARVIS POSTs the frozen invocation.

```toml
[[tools.http]]
name = "crm.update"
description = "Update a CRM record."
url = "https://crm.internal/arvis/update"
effect = "mutating"
replay_safety = "idempotent"
input_schema = { type = "object" }
timeout_s = 10
headers = { "X-Tenant-Zone" = "eu" }         # plain values: never a credential
headers_env = { Authorization = "CRM_TOKEN" } # values read from the environment at start-up
reconcile_url = "https://crm.internal/arvis/reconcile"  # optional: asked about uncertain calls

[tools.http.auth.token_exchange]             # optional: the caller's own token, exchanged
token_endpoint = "https://idp.example.com/token"
audience = "crm"
client_id = "arvis"
client_secret_env = "ARVIS_CRM_EXCHANGE_SECRET"
```

**Per-user credentials** (:mod:`arvis.tools.credentials`). With ``auth.token_exchange``
each call exchanges the caller's token (RFC 8693) for one of ``audience`` and sends it as
``Authorization: Bearer …``; a failed exchange is ``EFFECT_NOT_STARTED``
(``credential_exchange_failed``): nothing was sent. ``headers_env`` may not then set
``Authorization``. A reconcile call is the sweeper's, with no caller: it is sent without.

**Egress.** ``url`` is the tool's fixed destination (:attr:`HttpTool.destination`):
the egress gate checks its host against ``egress_hosts``, for read-only tools
too, so an HTTP tool needs no ``network.access`` tag (a read-only one may not
hold it). Redirects are never followed: the checked host is the only one reached.

**Secrets.** ``headers`` are written in ``arvis.toml`` and refuse anything that
looks like a credential (``Authorization``, ``Proxy-Authorization``,
``Cookie``, or a name containing token, secret, key, auth, password,
credential). Credentials go in ``headers_env``: header name → environment
variable, read once at start-up from the environment the host injects
(:class:`~arvis.tools.registry.ToolHost`); a missing variable stops start-up
naming the tool and the variable. Their values are sent and never shown:
not in errors, logs, the journal, ``arvis tools`` or ``GET /v1/tools``.

**The request.** ``POST url`` with ``Content-Type: application/json``,
``Idempotency-Key: <the invocation's key>`` (send it downstream to dedupe
retries), the configured headers and, when tracing is on (docs/telemetry.md), the
W3C ``traceparent``/``tracestate`` of the call's dispatch span, which the host's
HTTP client adds to every request it sends. The body is the RFC 8785 (JCS) object::

    {
      "call_id": "…",                  # correlates this call
      "context": {                     # the sealed AuthorizedEffectContext (DESIGN §1)
        "tenant_id": "acme",
        "principal_id": "agent-7",     # who asked
        "auth_method": "api_key",      # how they authenticated
        "key_id": "k_agent",           # the API key's id (never its secret), or null
        "roles": ["agent"],
        "run_id": "…", "causal_id": "…",
        "plan_id": "…",                # the tool plan the run is bound to
        "instance_id": "…"             # the ARVIS instance that admitted the effect
      },
      "idempotency_key": "…",          # the same as the header
      "payload": {…},                  # the frozen, schema-checked payload
      "tool": "crm.update"
    }

**Reconcile.** With ``reconcile_url`` (same scheme, host and port as ``url``, so it
reaches only the host the egress gate checked), the sweeper asks what became of an
uncertain call (issue 16): ``POST reconcile_url`` with the same headers and the JCS
object ``{"call_id", "idempotency_key", "tool"}`` of the original invocation. A
``200`` answer ``{"outcome": "completed" | "failed" | "not_started" | "unknown",
"evidence": "…"}`` is taken; anything else (an error, a timeout, another status or
body) is ``unknown`` and changes nothing.

**The answer.** ``2xx`` with a tool result as JSON: ``{"value": ...}`` or
``{"problem": {code, detail, effect_started}}``; a ``2xx`` body that is not one is
``EFFECT_FAILED`` (the endpoint answered, its answer cannot be read). ``202
Accepted`` is work that started and completes later: ``EFFECT_STARTED``, its JSON
body (or null when it has none, or none ARVIS can journal) kept as the result; a
read-only tool may not answer it (refused, not started).

**Not-started needs proof** (DESIGN §10, :mod:`arvis.tools.remote`). Only a
connection that could not be made (refused, timed out connecting, no pooled slot)
proves the effect did not start: ``EFFECT_NOT_STARTED``, retry advised. Every
other status — a redirect, a ``4xx``, a ``5xx`` — and a timeout or reset after the
request was sent come from a request that reached the endpoint, which may have
acted before it answered: ``EFFECT_STATE_UNKNOWN``, never retried for a
replay-unsafe tool. An operator whose endpoint promises that some statuses are
answered before it acts declares them for that tool::

    not_started_statuses = [400, 422, 429]   # 400-599; these answers are "not started"

and those answers become a ``remote_rejected`` problem whose effect did not start
(the confirmation is released, a retry runs). A read-only tool has nothing to
start: any uncertain ending of it is "not started" and may be retried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

import httpx
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from arvis.domain.canonical import canonical_bytes
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.errors import DefinitionError
from arvis.tools.base import Reconcile, Reconciliation, Reporter, ToolInvocation, ToolResult
from arvis.tools.credentials import (
    ExchangeFailed,
    TokenExchanger,
    ToolAuth,
    one_authorization,
    token_exchanger,
)
from arvis.tools.remote import (
    HTTP_KIND,
    TRANSPORT_HEADERS,
    HeaderFields,
    HeaderRules,
    RemoteOutcomes,
    check_declared,
    read_env_headers,
)

_URL_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f\\]")
# Headers ARVIS sets itself (W3C Trace Context belongs to the call's tracing), or
# that belong to the transport.
_HEADERS = HeaderRules(
    TRANSPORT_HEADERS | {"idempotency-key", "traceparent", "tracestate"}, owner="ARVIS"
)
# What of an entry is the tool's definition; the rest says how to reach it.
_DEFINITION_FIELDS = set(
    ("name", "description", "input_schema", "effect", "replay_safety", "capabilities")
)
_NOT_AN_ERROR = (
    "is not an error status (400-599): only an error answer can be declared to mean "
    "the effect did not start"
)


def check_endpoint(url: str) -> str:
    """A configured endpoint ARVIS posts to (a tool's, a webhook's): one unambiguous
    http(s) URL with a host, no userinfo, no fragment. Raises ValueError."""
    if _URL_UNSAFE.search(url):
        raise ValueError("the url may not contain whitespace, control characters or '\\'")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ValueError("the url is not a valid http(s) URL") from None
    if not parsed.host:
        raise ValueError("the url names no host")
    if parsed.userinfo:
        raise ValueError(
            "the url may not carry userinfo: send credentials with headers_env, and "
            "the host after '@' is the one reached"
        )
    if parsed.fragment:
        raise ValueError("the url may not carry a fragment")
    return url


Endpoint = Annotated[str, Field(pattern=r"^https?://"), AfterValidator(check_endpoint)]
"""A configured endpoint's URL, checked by :func:`check_endpoint`."""


class HttpToolConfig(HeaderFields):
    """One ``[[tools.http]]`` entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header_rules = _HEADERS

    name: str
    description: str
    url: Endpoint
    """The endpoint; its host is what the egress gate checks."""
    effect: Effect
    replay_safety: ReplaySafety
    capabilities: list[str] = Field(default_factory=list)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    reconcile_url: str | None = Field(default=None, pattern=r"^https?://")
    """Asked about uncertain calls; same scheme, host and port as ``url``."""
    not_started_statuses: list[int] = Field(default_factory=list)
    """Error statuses (400-599) the endpoint answers only before it acts: the operator's
    word that such an answer means the effect did not start (DESIGN §10)."""
    auth: ToolAuth | None = None
    """Per-user credentials: the caller's token exchanged for this tool's (RFC 8693)."""

    @field_validator("auth")
    @classmethod
    def _one_authorization(cls, auth: ToolAuth | None, info: ValidationInfo) -> ToolAuth | None:
        one_authorization(auth, info.data.get("headers_env", {}))
        return auth

    @field_validator("reconcile_url")
    @classmethod
    def _reconcile_endpoint(cls, url: str | None, info: ValidationInfo) -> str | None:
        if url is None:
            return None
        check_endpoint(url)
        main = info.data.get("url")
        if main is not None:
            ours, theirs = httpx.URL(url), httpx.URL(main)
            if (ours.scheme, ours.host, ours.port) != (theirs.scheme, theirs.host, theirs.port):
                raise ValueError(
                    "reconcile_url must have the scheme, host and port of url: it may reach "
                    "only the destination the egress gate checks"
                )
        return url

    @field_validator("not_started_statuses")
    @classmethod
    def _declared_statuses(cls, statuses: list[int]) -> list[int]:
        return check_declared(
            statuses, "status", lambda status: None if 400 <= status <= 599 else _NOT_AN_ERROR
        )


class HttpTool:
    """A tool whose body is an HTTP endpoint."""

    def __init__(
        self,
        definition: ToolDefinition,
        config: HttpToolConfig,
        client: httpx.AsyncClient,
        secret_headers: Mapping[str, str] | None = None,
        exchanger: TokenExchanger | None = None,
    ) -> None:
        self.definition = definition
        self._config = config
        self._client = client
        self._headers = {**config.headers, **(secret_headers or {})}
        self._exchanger = exchanger
        self._outcomes = RemoteOutcomes(HTTP_KIND, definition, config.not_started_statuses)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def destination(self) -> str:
        """The configured endpoint: the one URL every call reaches (see the egress gate)."""
        return self._config.url

    def __repr__(self) -> str:
        return f"HttpTool({self.name!r}, {self._config.url!r})"

    @property
    def reconcile(self) -> Reconcile | None:
        """The reconcile hook when ``reconcile_url`` is declared (issue 16), else None."""
        return None if self._config.reconcile_url is None else self._reconcile

    async def _reconcile(self, invocation: ToolInvocation) -> Reconciliation:
        url = self._config.reconcile_url
        assert url is not None
        body = canonical_bytes(
            {
                "call_id": invocation.call_id,
                "idempotency_key": invocation.idempotency_key,
                "tool": invocation.tool,
            }
        )
        unknown = Reconciliation(outcome="unknown")
        try:
            response = await self._post(url, body, invocation)
        except httpx.HTTPError:
            return unknown
        if response.status_code != 200:
            return unknown
        try:
            return Reconciliation.model_validate(response.json())
        except (ValueError, ValidationError):
            return unknown

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        context = invocation.context
        body = canonical_bytes(
            {
                "call_id": invocation.call_id,
                "context": {
                    "tenant_id": context.tenant_id,
                    "principal_id": context.principal_id,
                    "auth_method": context.auth_method,
                    "key_id": context.key_id,
                    "roles": list(context.roles),
                    "run_id": context.run_id,
                    "causal_id": context.causal_id,
                    "plan_id": context.plan_id,
                    "instance_id": context.instance_id,
                },
                "idempotency_key": invocation.idempotency_key,
                "payload": invocation.payload.value,
                "tool": invocation.tool,
            }
        )
        bearer = await self._bearer(invocation)
        try:
            response = await self._post(self._config.url, body, invocation, bearer)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout):
            # No connection, so not one byte of the request left ARVIS: the proof.
            raise self._outcomes.unreachable(invocation, "could not connect") from None
        except httpx.HTTPError as exc:
            raise self._outcomes.no_answer(invocation, exc) from None
        return self._result(invocation, response)

    async def _bearer(self, invocation: ToolInvocation) -> str | None:
        """The exchanged per-user token, or None without ``auth``; a failed exchange is
        refused here, before a byte is sent to the tool."""
        if self._exchanger is None:
            return None
        try:
            return await self._exchanger.bearer_for(invocation.context)
        except ExchangeFailed as failed:
            raise self._outcomes.exchange_failed(invocation, failed) from None

    async def _post(
        self, url: str, body: bytes, invocation: ToolInvocation, bearer: str | None = None
    ) -> httpx.Response:
        headers = {
            **self._headers,
            "Content-Type": "application/json",
            "Idempotency-Key": invocation.idempotency_key,
        }
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        # Never follow a redirect: the egress gate checked this host only.
        return await self._client.post(
            url,
            content=body,
            headers=headers,
            timeout=self._config.timeout_s,
            follow_redirects=False,
        )

    def _result(self, invocation: ToolInvocation, response: httpx.Response) -> ToolResult:
        status = response.status_code
        if status == 202:
            return self._accepted(invocation, response)
        if 200 <= status < 300:
            try:
                answer = response.json()
                if isinstance(answer, dict) and "pending" in answer:
                    # Accepted work is said by the status, never by a body field.
                    raise ValueError("pending is not part of a remote answer")
                return ToolResult.model_validate(answer)
            except (ValueError, ValidationError):
                raise self._outcomes.failed(
                    invocation, HTTP_KIND.invalid, "not a tool result", retryable=False
                ) from None
        # An answer proves the request arrived; the endpoint may have acted first.
        return self._outcomes.error_answer(invocation, status)

    def _accepted(self, invocation: ToolInvocation, response: httpx.Response) -> ToolResult:
        if self.definition.read_only:
            # A read has nothing to start: an endpoint deferring it broke its contract.
            # (Unknown for a read is "not started": there was nothing to start.)
            raise self._outcomes.unknown(
                invocation, HTTP_KIND.invalid, "a read answered 202 Accepted"
            )
        try:
            return ToolResult.accepted(response.json() if response.content else None)
        except (ValueError, ValidationError):
            # The work was accepted whatever its receipt says: keep the boundary.
            return ToolResult.accepted(None)


def http_tool(
    config: HttpToolConfig,
    client: httpx.AsyncClient,
    *,
    source: str,
    environ: Mapping[str, str],
) -> HttpTool:
    """Build one declared HTTP tool; a contradiction names the tool, the rule and the entry.

    ``environ`` supplies the ``headers_env`` values; a variable that is unset or
    empty stops start-up with a :class:`ConfigurationError` naming the tool and
    the variable (never a value).
    """
    try:
        definition = ToolDefinition(**config.model_dump(include=_DEFINITION_FIELDS))
    except DefinitionError as exc:
        raise DefinitionError(exc.tool, f"{exc.rule} (declared by {source})") from None
    what = f"{source} tool {config.name!r}"
    secrets = read_env_headers(what, config.headers_env, environ)
    exchanger = token_exchanger(config.auth, client, what=what, environ=environ)
    return HttpTool(definition, config, client, secrets, exchanger)

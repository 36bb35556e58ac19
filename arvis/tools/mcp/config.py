"""``[[tools.mcp]]``: upstream MCP servers whose tools ARVIS governs (DESIGN §3).

```toml
[[tools.mcp]]
name = "notes"                              # its tools become notes.<tool>
command = ["python", "notes_server.py"]     # stdio; or url = "http://127.0.0.1:9000/mcp"
trust_annotations = false                   # default: the server's hints are not believed
not_started_codes = []                      # JSON-RPC errors the server answers before acting
[tools.mcp.overrides.add_note]
effect = "mutating"
replay_safety = "unsafe"
capabilities = ["filesystem.write"]
not_started_codes = [-32602]                # replaces the server's list for this tool

[[tools.mcp]]
name = "crm"
url = "https://crm.internal/mcp"
user_sessions = 32                          # per-user sessions kept open (with auth)
[tools.mcp.auth.token_exchange]             # per-user credentials, as [[tools.http]]'s
token_endpoint = "https://idp.example.com/token"
audience = "crm"
client_id = "arvis"
client_secret_env = "ARVIS_CRM_EXCHANGE_SECRET"
```

Declared, never discovered: the server's tool list is read at start-up and pinned
into the plan. This module is configuration only; it imports nothing of the MCP SDK.

**``auth``** (:mod:`arvis.tools.credentials`, a ``url`` server only): every call goes on
a session of its caller's own (tenant, person, agent), opened and sent with the caller's
token exchanged for ``audience`` as ``Authorization: Bearer …``
(:mod:`arvis.tools.mcp.callers`); the start-up listing of the tools uses the static
``headers``/``headers_env`` only (a service credential, or none), and ``headers_env`` may
not then set ``Authorization``.

**``not_started_codes``** (DESIGN §10 "Not-started needs proof"): any JSON-RPC
error answer proves the call reached the server, which may have acted before it
answered, so it is ``EFFECT_STATE_UNKNOWN`` — unless the operator lists its code
here, for a server that answers those codes only before it acts. Two kinds of
code can never be declared: ``-32000`` and ``-32001``, which ARVIS's MCP client
raises itself for a closed connection and a timeout (no answer at all), and, for a
``url`` server, ``-32700``, ``-32600``, ``-32601`` and ``-32603``, which the
client also makes up from HTTP answers it could not read (a 202, a redirect, a
404, a page, a 5xx, a body that is not JSON), so they cannot be told from the
server's own.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arvis.domain.definitions import Effect, ReplaySafety
from arvis.tools.credentials import ToolAuth, one_authorization
from arvis.tools.remote import (
    TRANSPORT_HEADERS,
    HeaderFields,
    HeaderRules,
    check_declared,
)

SERVER_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
_URL = re.compile(r"^https?://[^\s\\@#]+$")
# Set by the MCP transport itself (and Mcp-Name, Mcp-Param-* on a modern session).
_HEADERS = HeaderRules(
    TRANSPORT_HEADERS
    | {"accept", "last-event-id", "mcp-name", "mcp-protocol-version", "mcp-session-id"},
    owner="the MCP transport",
    reserved_prefixes=("mcp-param-",),
)
# Raised by ARVIS's own client: a closed connection, a timeout. Never an answer.
_CLIENT_CODES = frozenset({-32000, -32001})
# Also made up by the streamable HTTP client from HTTP answers it could not read.
_HTTP_CLIENT_CODES = frozenset({-32700, -32600, -32601, -32603})


class McpToolOverride(BaseModel):
    """The operator's word on one upstream tool; whatever it sets always wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    effect: Effect | None = None
    replay_safety: ReplaySafety | None = None
    capabilities: list[str] | None = None
    """Replaces the capability tags derived for the tool."""
    not_started_codes: list[int] | None = None
    """Replaces the server's ``not_started_codes`` for this tool."""

    @field_validator("not_started_codes")
    @classmethod
    def _codes(cls, codes: list[int] | None) -> list[int] | None:
        return None if codes is None else _check_codes(codes)


class McpServerConfig(HeaderFields):
    """One ``[[tools.mcp]]`` entry: a stdio ``command`` or a streamable HTTP ``url``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header_rules = _HEADERS

    name: str = Field(pattern=SERVER_NAME)
    """Prefix of the server's tools in the plan: ``<name>.<tool>``."""
    command: list[str] | None = Field(default=None, min_length=1)
    """Executable and arguments of a stdio server; ARVIS starts it as its child."""
    url: str | None = None
    """Endpoint of a streamable HTTP server; its host is what the egress gate checks."""
    trust_annotations: bool = False
    """Believe the server's ``readOnlyHint`` / ``idempotentHint`` / ``openWorldHint``."""
    optional: bool = False
    """Unreachable at start-up: leave its tools out (and say so) instead of stopping."""
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    """How long one call may wait for the server's answer."""
    startup_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """How long starting (or restarting) the session and listing its tools may take;
    keep it below ``ARVIS_TOOL_TIMEOUT_S`` so a call that could not be sent is
    journaled as not started rather than cut off by the dispatch deadline."""
    not_started_codes: list[int] = Field(default_factory=list)
    """JSON-RPC error codes this server answers only before a tool acts: such an
    answer is "not started" (the module docstring says which codes cannot be)."""
    overrides: dict[str, McpToolOverride] = Field(default_factory=dict)
    """Keyed by the server's own tool name (without the prefix)."""
    auth: ToolAuth | None = None
    """Per-user credentials (a ``url`` server): the caller's token exchanged for the
    server's audience (RFC 8693), sent on a session of the caller's own."""
    user_sessions: int = Field(default=32, ge=1, le=4096)
    """With ``auth``: how many callers' idle sessions are kept open (the least recently
    used is closed first; a session with a call in flight is never closed under it)."""

    def declared_not_started(self, tool: str) -> list[int]:
        """The codes that mean "not started" for ``tool`` (its override's, else the server's)."""
        override = self.overrides.get(tool)
        if override is not None and override.not_started_codes is not None:
            return override.not_started_codes
        return self.not_started_codes

    @field_validator("url")
    @classmethod
    def _endpoint(cls, url: str | None) -> str | None:
        if url is not None and not _URL.match(url):
            raise ValueError(
                "the url must be http(s)://host/path, without whitespace, userinfo or fragment"
            )
        return url

    @field_validator("not_started_codes")
    @classmethod
    def _codes(cls, codes: list[int]) -> list[int]:
        return _check_codes(codes)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.command is not None and (self.headers or self.headers_env):
            raise ValueError("headers and headers_env are for a url server")
        if self.command is not None and self.auth is not None:
            raise ValueError("auth is for a url server: a stdio server has no per-user credentials")
        one_authorization(self.auth, self.headers_env)
        if self.url is not None:
            declared = [("not_started_codes", self.not_started_codes)] + [
                (f"overrides.{tool}.not_started_codes", override.not_started_codes or [])
                for tool, override in self.overrides.items()
            ]
            for field, codes in declared:
                made_up = sorted(set(codes) & _HTTP_CLIENT_CODES)
                if made_up:
                    raise ValueError(
                        f"{field}: {made_up[0]} cannot be declared for a url server: the MCP "
                        "client also makes it up from HTTP answers it could not read, which "
                        "prove the call arrived"
                    )
        return self


def _check_codes(codes: list[int]) -> list[int]:
    return check_declared(codes, "code", _never_an_answer)


def _never_an_answer(code: int) -> str | None:
    if code in _CLIENT_CODES:
        return (
            "is raised by ARVIS's own MCP client (a closed connection or a timeout: no "
            "answer at all) and cannot mean the effect did not start"
        )
    return None

"""``[[tools.mcp]]``: upstream MCP servers whose tools ARVIS governs (DESIGN §3).

```toml
[[tools.mcp]]
name = "notes"                              # its tools become notes.<tool>
command = ["python", "notes_server.py"]     # stdio; or url = "http://127.0.0.1:9000/mcp"
trust_annotations = false                   # default: the server's hints are not believed
[tools.mcp.overrides.add_note]
effect = "mutating"
replay_safety = "unsafe"
capabilities = ["filesystem.write"]
```

Declared, never discovered: the server's tool list is read at start-up and pinned
into the plan. This module is configuration only; it imports nothing of the MCP SDK.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from arvis.domain.definitions import Effect, ReplaySafety

SERVER_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
# RFC 9110 field-name token characters.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
HEADER_VALUE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL = re.compile(r"^https?://[^\s\\@#]+$")
# Set by the MCP transport itself, or by HTTP.
_RESERVED = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


class McpToolOverride(BaseModel):
    """The operator's word on one upstream tool; whatever it sets always wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    effect: Effect | None = None
    replay_safety: ReplaySafety | None = None
    capabilities: list[str] | None = None
    """Replaces the capability tags derived for the tool."""


class McpServerConfig(BaseModel):
    """One ``[[tools.mcp]]`` entry: a stdio ``command`` or a streamable HTTP ``url``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=SERVER_NAME)
    """Prefix of the server's tools in the plan: ``<name>.<tool>``."""
    command: list[str] | None = Field(default=None, min_length=1)
    """Executable and arguments of a stdio server; ARVIS starts it as its child."""
    url: str | None = None
    """Endpoint of a streamable HTTP server; its host is what the egress gate checks."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Plain headers for a ``url`` server; a credential here is refused."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name → environment variable holding its value, read at start-up."""
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
    overrides: dict[str, McpToolOverride] = Field(default_factory=dict)
    """Keyed by the server's own tool name (without the prefix)."""

    @field_validator("url")
    @classmethod
    def _endpoint(cls, url: str | None) -> str | None:
        if url is not None and not _URL.match(url):
            raise ValueError(
                "the url must be http(s)://host/path, without whitespace, userinfo or fragment"
            )
        return url

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        # Imported here: arvis.tools imports this module while it initialises.
        from arvis.tools.http import looks_secret

        for header, value in headers.items():
            _check_header_name(header)
            if looks_secret(header):
                raise ValueError(
                    f"header {header!r} looks like a credential and may not be written in "
                    "arvis.toml: name the environment variable that holds it in headers_env"
                )
            if not HEADER_VALUE.match(value):
                raise ValueError(f"header {header!r}: the value must be printable ASCII")
        return headers

    @field_validator("headers_env")
    @classmethod
    def _env_headers(cls, headers_env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        plain = {header.lower() for header in info.data.get("headers", {})}
        for header, variable in headers_env.items():
            _check_header_name(header)
            if header.lower() in plain:
                raise ValueError(f"header {header!r} is in both headers and headers_env")
            if not _ENV_NAME.match(variable):
                raise ValueError(f"header {header!r}: {variable!r} is not a variable name")
        return headers_env

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.command is not None and (self.headers or self.headers_env):
            raise ValueError("headers and headers_env are for a url server")
        return self


def _check_header_name(header: str) -> None:
    if not _HEADER_NAME.match(header):
        raise ValueError(f"{header!r} is not a valid header name")
    if header.lower() in _RESERVED:
        raise ValueError(f"header {header!r} is set by the MCP transport and may not be set")

"""What the two remote tool kinds share: header rules and the "not started" rule.

An HTTP tool (:mod:`arvis.tools.http`) and an upstream MCP server
(:mod:`arvis.tools.mcp.config`, :mod:`arvis.tools.mcp.tools`) both send a request to a
host ARVIS does not control. Both configure headers the same way and classify
the end of a call by one rule, so neither can drift from the other.

**Headers.** ``headers`` hold plain values written in ``arvis.toml``: a name
that looks like a credential is refused (it belongs in ``headers_env``), a value
must be printable ASCII on one line (no header injection), and the headers the
transport sets itself are reserved. ``headers_env`` maps a header to the
environment variable holding its value, read once at start-up; its value is
sent and never shown.

**Not-started needs proof (DESIGN §10).** ``EFFECT_NOT_STARTED`` — a released
confirmation and a free retry — only where ARVIS can show the request never
reached the tool: the connection was refused (or never got a pooled slot), or
ARVIS's own client refused it before sending. Any answer from the far side (an
error status, a redirect, a 404, a malformed body, a JSON-RPC error) proves the
request arrived: the effect is unknown (``EFFECT_STATE_UNKNOWN``), unless the
operator declared that answer "refused before anything ran" for the tool
(``not_started_statuses`` / ``not_started_codes``). A read-only tool has nothing
to start: its unknown outcome is "not started" and may be retried.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.errors import ConfigurationError
from arvis.tools.base import ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.limits import MAX_MESSAGE_CHARS

# RFC 9110 field-name token characters.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Visible ASCII, inner spaces and tabs: no CR/LF (header injection), nothing a
# client would have to encode.
HEADER_VALUE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_WORDS = ("token", "secret", "key", "auth", "password", "passwd", "credential", "cookie")

TRANSPORT_HEADERS = frozenset(
    {"connection", "content-length", "content-type", "host", "te", "trailer"}
    | {"transfer-encoding", "upgrade"}
)
"""Headers HTTP itself owns: reserved for every remote kind."""


def looks_secret(header: str) -> bool:
    """Whether a header name suggests a credential (case-insensitive)."""
    lowered = header.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def check_header_name(header: str, reserved: Collection[str], owner: str) -> None:
    """A configurable header name; ``owner`` says who sets the ``reserved`` ones."""
    if not _HEADER_NAME.match(header):
        raise ValueError(f"{header!r} is not a valid header name")
    if header.lower() in reserved:
        raise ValueError(f"header {header!r} is set by {owner} and may not be configured")


def check_plain_headers(
    headers: Mapping[str, str], reserved: Collection[str], owner: str
) -> dict[str, str]:
    """``headers`` of an entry: valid names, no credential, printable values. Raises ValueError."""
    for header, value in headers.items():
        check_header_name(header, reserved, owner)
        if looks_secret(header):
            raise ValueError(
                f"header {header!r} looks like a credential and may not be written in "
                f"arvis.toml: name the environment variable that holds it in headers_env "
                f'(headers_env = {{ "{header}" = "MY_VARIABLE" }})'
            )
        if not HEADER_VALUE.match(value):
            raise ValueError(f"header {header!r}: the value must be printable ASCII on one line")
    return dict(headers)


def check_env_headers(
    headers_env: Mapping[str, str],
    plain: Collection[str],
    reserved: Collection[str],
    owner: str,
) -> dict[str, str]:
    """``headers_env`` of an entry whose plain headers are ``plain``. Raises ValueError."""
    lowered = {header.lower() for header in plain}
    for header, variable in headers_env.items():
        check_header_name(header, reserved, owner)
        if header.lower() in lowered:
            raise ValueError(f"header {header!r} is in both headers and headers_env")
        if not _ENV_NAME.match(variable):
            raise ValueError(f"header {header!r}: {variable!r} is not an environment variable name")
    return dict(headers_env)


def read_env_headers(
    source: str, headers_env: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """The ``headers_env`` values from ``environ``; a problem names ``source`` and the
    variable, never a value (:class:`ConfigurationError`)."""
    values: dict[str, str] = {}
    for header, variable in headers_env.items():
        value = environ.get(variable, "").strip()
        if not value:
            raise ConfigurationError(
                f"{source}: header {header!r} reads the environment variable {variable}, "
                "which is not set"
            )
        if not HEADER_VALUE.match(value):
            raise ConfigurationError(
                f"{source}: the environment variable {variable} (header {header!r}) must "
                "hold printable ASCII on one line"
            )
        values[header] = value
    return values


class RemoteOutcomes:
    """How one remote tool's calls end, by the module's rule.

    ``declared`` are the answers (HTTP statuses, JSON-RPC codes) the operator
    declared to mean "refused before anything ran" for this tool.
    """

    def __init__(self, definition: ToolDefinition, declared: Collection[int] = ()) -> None:
        self.definition = definition
        self.declared = frozenset(declared)

    def not_sent(
        self, invocation: ToolInvocation, code: str, message: str, *, retryable: bool = True
    ) -> ToolExecutionError:
        """Nothing reached the far side: proof that the effect did not start."""
        return self._error(invocation, False, retryable, code, message)

    def unknown(self, invocation: ToolInvocation, code: str, message: str) -> ToolExecutionError:
        """The request may have arrived and no result came back: nobody knows."""
        return self._error(invocation, None, False, code, message)

    def failed(
        self, invocation: ToolInvocation, code: str, message: str, *, retryable: bool
    ) -> ToolExecutionError:
        """The far side answered that the call failed after it began."""
        return self._error(invocation, True, retryable, code, message)

    def refusal(self, answer: int, code: str, detail: str) -> ToolResult | None:
        """A not-started problem when the operator declared ``answer`` so, else None."""
        if answer not in self.declared:
            return None
        text = f"{self.definition.name}: {detail}"[:MAX_MESSAGE_CHARS]
        return ToolResult.fail(code, text, effect_started=False)

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
            message=f"{self.definition.name}: {message}"[:MAX_MESSAGE_CHARS],
        )

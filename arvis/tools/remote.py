"""What the two remote tool kinds share: header rules and the "not started" rule.

An HTTP tool (:mod:`arvis.tools.http`) and an upstream MCP server
(:mod:`arvis.tools.mcp.config`, :mod:`arvis.tools.mcp.tools`) both send a request to a
host ARVIS does not control. Both configure headers with one validator
(:class:`HeaderRules`) and classify the end of a call by one rule
(:class:`RemoteOutcomes`), so neither can drift from the other: a kind only says
what it calls the far side and the code of each event (:class:`RemoteKind`), and
which of its transport's exceptions mean "no connection" or "no answer".

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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.errors import ConfigurationError
from arvis.tools.base import ToolInvocation, ToolResult
from arvis.tools.credentials import ExchangeFailed
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


@dataclass(frozen=True)
class HeaderRules:
    """The one header validator of every remote kind: which names an operator may set.

    ``reserved`` (lower-case names) and ``reserved_prefixes`` are set by ``owner``
    (ARVIS, a transport) and may not be configured; everything else is checked
    alike for every kind, with the same messages.
    """

    reserved: frozenset[str]
    owner: str
    reserved_prefixes: tuple[str, ...] = ()

    def check_name(self, header: str) -> None:
        """A configurable header name. Raises ValueError."""
        if not _HEADER_NAME.match(header):
            raise ValueError(f"{header!r} is not a valid header name")
        lowered = header.lower()
        if lowered in self.reserved or lowered.startswith(self.reserved_prefixes):
            raise ValueError(f"header {header!r} is set by {self.owner} and may not be configured")

    def plain(self, headers: Mapping[str, str]) -> dict[str, str]:
        """``headers`` of an entry: valid names, no credential, printable values."""
        for header, value in headers.items():
            self.check_name(header)
            if looks_secret(header):
                raise ValueError(
                    f"header {header!r} looks like a credential and may not be written in "
                    f"arvis.toml: name the environment variable that holds it in headers_env "
                    f'(headers_env = {{ "{header}" = "MY_VARIABLE" }})'
                )
            if not HEADER_VALUE.match(value):
                raise ValueError(
                    f"header {header!r}: the value must be printable ASCII on one line"
                )
        return dict(headers)

    def env(self, headers_env: Mapping[str, str], plain: Collection[str]) -> dict[str, str]:
        """``headers_env`` of an entry whose plain headers are ``plain``."""
        lowered = {header.lower() for header in plain}
        for header, variable in headers_env.items():
            self.check_name(header)
            if header.lower() in lowered:
                raise ValueError(f"header {header!r} is in both headers and headers_env")
            if not _ENV_NAME.match(variable):
                raise ValueError(
                    f"header {header!r}: {variable!r} is not an environment variable name"
                )
        return dict(headers_env)


class HeaderFields(BaseModel):
    """The ``headers`` and ``headers_env`` of a remote kind's entry, checked by its rules."""

    header_rules: ClassVar[HeaderRules]

    headers: dict[str, str] = Field(default_factory=dict)
    """Plain headers; a credential here is refused (use ``headers_env``)."""
    headers_env: dict[str, str] = Field(default_factory=dict)
    """Header name → environment variable holding its value, read at start-up."""

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return cls.header_rules.plain(headers)

    @field_validator("headers_env")
    @classmethod
    def _env_headers(cls, headers_env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return cls.header_rules.env(headers_env, info.data.get("headers", {}))


def check_declared(answers: list[int], word: str, refuse: Callable[[int], str | None]) -> list[int]:
    """The answers (``word``: status, code) an operator declared "not started" for a tool;
    ``refuse`` says why one can never be (None when it can). Raises ValueError."""
    for answer in answers:
        reason = refuse(answer)
        if reason is not None:
            raise ValueError(f"{answer} {reason}")
    if len(set(answers)) != len(answers):
        raise ValueError(f"a {word} is listed twice")
    return answers


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


@dataclass(frozen=True)
class RemoteKind:
    """One remote tool kind: how it names the far side, and the code of each event."""

    party: str
    """The far side in messages: "the endpoint", "the MCP server"."""
    unreachable: str
    """Nothing was sent (no connection): not started."""
    no_answer: str
    """Sent, and no complete answer came back: unknown."""
    rejected: str
    """An error answer the operator declared "refused before anything ran"."""
    answered: str
    """Any other error answer: it proves the call arrived, so unknown."""
    invalid: str
    """An answer that is not a result."""


# How each kind names the far side and the code it journals for each event, side
# by side so that neither can drift unseen:  HTTP tool | upstream MCP tool.
_KINDS = {
    "party": ("the endpoint", "the MCP server"),
    "unreachable": ("connect_failed", "upstream_unavailable"),
    "no_answer": ("remote_unknown", "upstream_unknown"),
    "rejected": ("remote_rejected", "upstream_rejected"),
    "answered": ("remote_failed", "upstream_unknown"),
    "invalid": ("invalid_remote_response", "invalid_upstream_result"),
}
HTTP_KIND = RemoteKind(**{field: column[0] for field, column in _KINDS.items()})
"""The HTTP tool kind (:mod:`arvis.tools.http`)."""
MCP_KIND = RemoteKind(**{field: column[1] for field, column in _KINDS.items()})
"""The upstream MCP tool kind (:mod:`arvis.tools.mcp.tools`)."""


class RemoteOutcomes:
    """How one remote tool's calls end, by the module's rule: one classification for
    every kind, so the same far-side event gives the same boundary and message.

    ``declared`` are the answers (HTTP statuses, JSON-RPC codes) the operator
    declared to mean "refused before anything ran" for this tool.
    """

    def __init__(
        self, kind: RemoteKind, definition: ToolDefinition, declared: Collection[int] = ()
    ) -> None:
        self.kind = kind
        self.definition = definition
        self.declared = frozenset(declared)

    def unreachable(self, invocation: ToolInvocation, detail: str) -> ToolExecutionError:
        """No connection could be made: not one byte of the request left ARVIS."""
        return self.not_sent(invocation, self.kind.unreachable, detail)

    def no_answer(self, invocation: ToolInvocation, exc: BaseException) -> ToolExecutionError:
        """The request may have arrived (a timeout, a dropped connection): nobody knows."""
        detail = f"no complete answer ({type(exc).__name__})"
        return self.unknown(invocation, self.kind.no_answer, detail)

    def error_answer(self, invocation: ToolInvocation, answer: int, detail: str = "") -> ToolResult:
        """An error answer: a not-started problem when the operator declared ``answer`` so;
        otherwise it proves the call arrived, and the far side may have acted first."""
        tail = f": {detail}" if detail else ""
        if answer in self.declared:
            text = f"{self.definition.name}: {self.kind.party} refused the call ({answer}){tail}"
            return ToolResult.fail(
                self.kind.rejected, text[:MAX_MESSAGE_CHARS], effect_started=False
            )
        said = f"{self.kind.party} answered {answer}, not a result; the effect is unknown{tail}"
        raise self.unknown(invocation, self.kind.answered, said)

    def not_sent(
        self, invocation: ToolInvocation, code: str, message: str, *, retryable: bool = True
    ) -> ToolExecutionError:
        """Nothing reached the far side: proof that the effect did not start."""
        return self._error(invocation, False, retryable, code, message)

    def exchange_failed(
        self, invocation: ToolInvocation, failed: ExchangeFailed
    ) -> ToolExecutionError:
        """No per-user token for the call (``auth``): refused before anything was sent,
        retry advised when the IdP could not be asked. The reason never holds a token."""
        message = f"token exchange failed, nothing was sent: {failed.reason}"
        return self.not_sent(
            invocation, "credential_exchange_failed", message, retryable=failed.retryable
        )

    def unknown(self, invocation: ToolInvocation, code: str, message: str) -> ToolExecutionError:
        """The request may have arrived and no result came back: nobody knows."""
        return self._error(invocation, None, False, code, message)

    def failed(
        self, invocation: ToolInvocation, code: str, message: str, *, retryable: bool
    ) -> ToolExecutionError:
        """The far side answered that the call failed after it began."""
        return self._error(invocation, True, retryable, code, message)

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

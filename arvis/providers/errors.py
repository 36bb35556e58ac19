"""The provider error tree: one class per stable code, retryable or terminal.

A :class:`ProviderError` means the model call produced no decision at all: every
fail-closed rule of DESIGN §8 raises one of these, and nothing the stream said
before the failure becomes work. ``retryable`` says whether repeating the whole
model call may succeed (the adapter itself never retries once a stream exists).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from arvis.domain.errors import ArvisError

ProviderErrorCode = Literal[
    "provider_error",
    "provider_auth_failed",
    "provider_rate_limited",
    "provider_unavailable",
    "provider_request_rejected",
    "provider_timeout",
    "provider_stream_error",
    "provider_response_failed",
    "provider_response_incomplete",
    "provider_stream_truncated",
    "provider_protocol_violation",
    "provider_unknown_tool",
    "provider_hosted_tool_output",
    "provider_arguments_invalid",
    "provider_arguments_schema_violation",
    "provider_duplicate_call_id",
    "provider_stream_mismatch",
    "provider_limit_exceeded",
    "provider_concurrent_receive",
    "provider_stream_closed",
]


class ProviderError(ArvisError):
    """A model call failed closed; no decision of it may be acted on."""

    code: ClassVar[ProviderErrorCode] = "provider_error"
    retryable: ClassVar[bool] = False
    """Whether repeating the whole model call (a new stream) may succeed."""

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        call_id: str | None = None,
        limit: str | None = None,
        status_code: int | None = None,
        provider_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.tool = tool
        """The tool name involved, when one is."""
        self.call_id = call_id
        """The provider's call id involved, when one is."""
        self.limit = limit
        """The name of the limit that was exceeded (``ProviderLimitExceeded``)."""
        self.status_code = status_code
        """The HTTP status of a start-up failure, when there was one."""
        self.provider_code = provider_code
        """The provider's own error code string, never its raw payload."""


# Start-up and transport failures.


class ProviderAuthFailed(ProviderError):
    """The provider refused the credentials (HTTP 401/403)."""

    code = "provider_auth_failed"


class ProviderRateLimited(ProviderError):
    """The provider asked us to slow down (HTTP 429)."""

    code = "provider_rate_limited"
    retryable = True


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or failed on its side (5xx, connection)."""

    code = "provider_unavailable"
    retryable = True


class ProviderRequestRejected(ProviderError):
    """The provider rejected the request itself (another 4xx); repeating will not help."""

    code = "provider_request_rejected"


class ProviderTimeout(ProviderError):
    """A receive or the start-up call ran past its deadline."""

    code = "provider_timeout"
    retryable = True


# What the stream said.


class ProviderStreamError(ProviderError):
    """The stream carried an ``error`` event."""

    code = "provider_stream_error"
    retryable = True


class ProviderResponseFailed(ProviderError):
    """The response ended in ``response.failed``."""

    code = "provider_response_failed"


class ProviderResponseIncomplete(ProviderError):
    """The response ended in ``response.incomplete`` (e.g. the output token limit)."""

    code = "provider_response_incomplete"


class ProviderStreamTruncated(ProviderError):
    """The stream ended without ``response.completed``."""

    code = "provider_stream_truncated"
    retryable = True


class ProviderProtocolViolation(ProviderError):
    """An event ARVIS does not know, a malformed event, or events out of order."""

    code = "provider_protocol_violation"


class ProviderUnknownTool(ProviderError):
    """The model called a tool the request did not offer."""

    code = "provider_unknown_tool"


class ProviderHostedToolOutput(ProviderError):
    """The output holds a provider-executed (hosted) tool item or an unknown item type."""

    code = "provider_hosted_tool_output"


class ProviderArgumentsInvalid(ProviderError):
    """A call's arguments are not a plain JSON object."""

    code = "provider_arguments_invalid"


class ProviderArgumentsSchemaViolation(ProviderError):
    """A call's arguments violate the tool's input schema."""

    code = "provider_arguments_schema_violation"


class ProviderDuplicateCallId(ProviderError):
    """Two calls of one response share a call id (one causal id names one decision)."""

    code = "provider_duplicate_call_id"


class ProviderStreamMismatch(ProviderError):
    """Streamed deltas disagree with the final arguments or the final text."""

    code = "provider_stream_mismatch"


class ProviderLimitExceeded(ProviderError):
    """A request limit (events, output items, argument or text bytes) was exceeded."""

    code = "provider_limit_exceeded"


# Misuse of a stream.


class ProviderConcurrentReceive(ProviderError):
    """A second receive was attempted while one was waiting."""

    code = "provider_concurrent_receive"


class ProviderStreamClosed(ProviderError):
    """The stream was closed by ``aclose()``; it yields nothing more."""

    code = "provider_stream_closed"

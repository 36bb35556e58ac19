"""The provider error tree: one class per stable code, retryable or terminal.

A :class:`ProviderError` means the model call produced no decision at all: every
fail-closed rule of DESIGN §8 raises one of these, and nothing the stream said
before the failure becomes work. ``retryable`` says whether repeating the whole
model call may succeed (the adapter itself never retries once a stream exists).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

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

    def __init_subclass__(
        cls,
        *,
        code: ProviderErrorCode | None = None,
        retryable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(code=code, **kwargs)
        if retryable is not None:
            cls.retryable = retryable

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


class ProviderAuthFailed(ProviderError, code="provider_auth_failed"):
    """The provider refused the credentials (HTTP 401/403)."""


class ProviderRateLimited(ProviderError, code="provider_rate_limited", retryable=True):
    """The provider asked us to slow down (HTTP 429)."""


class ProviderUnavailable(ProviderError, code="provider_unavailable", retryable=True):
    """The provider could not be reached or failed on its side (5xx, connection)."""


class ProviderRequestRejected(ProviderError, code="provider_request_rejected"):
    """The provider rejected the request itself (another 4xx); repeating will not help."""


class ProviderTimeout(ProviderError, code="provider_timeout", retryable=True):
    """A receive or the start-up call ran past its deadline."""


# What the stream said.


class ProviderStreamError(ProviderError, code="provider_stream_error", retryable=True):
    """The stream carried an ``error`` event."""


class ProviderResponseFailed(ProviderError, code="provider_response_failed"):
    """The response ended in ``response.failed``."""


class ProviderResponseIncomplete(ProviderError, code="provider_response_incomplete"):
    """The response ended in ``response.incomplete`` (e.g. the output token limit)."""


class ProviderStreamTruncated(ProviderError, code="provider_stream_truncated", retryable=True):
    """The stream ended without ``response.completed``."""


class ProviderProtocolViolation(ProviderError, code="provider_protocol_violation"):
    """An event ARVIS does not know, a malformed event, or events out of order."""


class ProviderUnknownTool(ProviderError, code="provider_unknown_tool"):
    """The model called a tool the request did not offer."""


class ProviderHostedToolOutput(ProviderError, code="provider_hosted_tool_output"):
    """The output holds a provider-executed (hosted) tool item or an unknown item type."""


class ProviderArgumentsInvalid(ProviderError, code="provider_arguments_invalid"):
    """A call's arguments are not a plain JSON object."""


class ProviderArgumentsSchemaViolation(ProviderError, code="provider_arguments_schema_violation"):
    """A call's arguments violate the tool's input schema."""


class ProviderDuplicateCallId(ProviderError, code="provider_duplicate_call_id"):
    """Two calls of one response share a call id (one causal id names one decision)."""


class ProviderStreamMismatch(ProviderError, code="provider_stream_mismatch"):
    """Streamed deltas disagree with the final arguments or the final text."""


class ProviderLimitExceeded(ProviderError, code="provider_limit_exceeded"):
    """A request limit (events, output items, argument or text bytes) was exceeded."""


# Misuse of a stream.


class ProviderConcurrentReceive(ProviderError, code="provider_concurrent_receive"):
    """A second receive was attempted while one was waiting."""


class ProviderStreamClosed(ProviderError, code="provider_stream_closed"):
    """The stream was closed by ``aclose()``; it yields nothing more."""

"""The provider: one Responses API streaming call per turn, its failures made typed.

Only a tool's name, description and input schema are sent; effect, replay
safety, capabilities and fingerprint never leave ARVIS.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
from openai import AsyncOpenAI, AsyncStream, omit
from openai.types.responses import EasyInputMessageParam, FunctionToolParam, ResponseStreamEvent

from arvis.providers._stream import Event, PumpedStream
from arvis.providers.base import ModelRequest, ModelStream
from arvis.providers.errors import (
    ProviderAuthFailed,
    ProviderError,
    ProviderProtocolViolation,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderStreamError,
    ProviderStreamTruncated,
    ProviderTimeout,
    ProviderUnavailable,
)
from arvis.providers.openai.events import ResponseTranslator
from arvis.providers.validation import strict_eligible

__all__ = ["OpenAIProvider", "tool_params"]


def tool_params(request: ModelRequest) -> list[FunctionToolParam]:
    """What the provider is told about each tool: name, description, schema, strictness."""
    params: list[FunctionToolParam] = []
    for definition in request.tools:
        schema = definition.input_schema
        params.append(
            FunctionToolParam(
                type="function",
                name=definition.name,
                description=definition.description,
                parameters=schema,
                strict=strict_eligible(schema),
            )
        )
    return params


def _input_params(request: ModelRequest) -> str | list[Any]:
    if isinstance(request.input, str):
        return request.input
    return [
        EasyInputMessageParam(role=message.role, content=message.content)
        for message in request.input
    ]


def map_sdk_error(exc: Exception) -> ProviderError:
    """A typed ``ProviderError`` for an SDK failure; the raw body is never copied."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code = getattr(exc, "code", None)
        provider_code = str(code)[:100] if code is not None else None
        message = f"the provider answered HTTP {status}"
        kind: type[ProviderError]
        if status in (401, 403):
            kind = ProviderAuthFailed
        elif status == 429:
            kind = ProviderRateLimited
        elif status == 408:
            kind = ProviderTimeout
        elif status == 409 or status >= 500:
            kind = ProviderUnavailable
        else:
            kind = ProviderRequestRejected
        return kind(message, status_code=status, provider_code=provider_code)
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeout("the provider did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable("the provider could not be reached")
    if isinstance(exc, openai.APIError):
        # The SDK raises this itself for a payload with a top-level "error" key.
        return ProviderStreamError("the provider reported an error in the stream")
    if isinstance(exc, ValueError):
        return ProviderProtocolViolation("an event of the stream is not valid JSON")
    return ProviderError(f"the provider call failed ({type(exc).__name__})")


def _plain(event: ResponseStreamEvent) -> dict[str, Any]:
    # The SDK builds its models without validation; take the JSON it was given
    # and let the translator check every field ARVIS uses.
    return event.to_dict(mode="json", warnings=False)


async def _next_event(stream: AsyncStream[ResponseStreamEvent]) -> dict[str, Any] | None:
    try:
        event = await stream.__anext__()
    except StopAsyncIteration:
        return None
    except (openai.OpenAIError, ValueError) as exc:
        raise map_sdk_error(exc) from None
    return _plain(event)


class OpenAIProvider:
    """A :class:`~arvis.providers.base.ModelProvider` on an ``AsyncOpenAI`` client.

    The client is the caller's and is trusted as given (its HTTP client, base URL,
    timeout and ``max_retries`` included). Its retries cover only the request that
    opens the stream; once :meth:`stream` has returned, nothing is retried.
    """

    def __init__(self, client: AsyncOpenAI, *, queue_size: int = 64) -> None:
        self._client = client
        self._queue_size = queue_size

    async def stream(self, request: ModelRequest) -> ModelStream:
        """Open the stream and read its first event before handing it over."""
        tools = tool_params(request)
        limits = request.limits
        try:
            sdk_stream = await self._client.responses.create(
                model=request.model,
                input=_input_params(request),
                instructions=request.instructions if request.instructions is not None else omit,
                tools=tools if tools else omit,
                max_output_tokens=(
                    limits.max_output_tokens if limits.max_output_tokens is not None else omit
                ),
                stream=True,
            )
        except (openai.OpenAIError, ValueError) as exc:
            raise map_sdk_error(exc) from None
        translator = ResponseTranslator(request)
        try:
            first = await _next_event(sdk_stream)
            if first is None:
                raise ProviderStreamTruncated("the stream ended before its first event")
            initial = translator.feed(first)
        except BaseException:
            # Cancellation included: the connection must not outlive a failed start.
            await sdk_stream.close()
            raise
        return PumpedStream(
            self._events(sdk_stream, translator),
            close=sdk_stream.close,
            initial=initial,
            queue_size=self._queue_size,
            receive_timeout_s=limits.receive_timeout_s,
        )

    @staticmethod
    async def _events(
        sdk_stream: AsyncStream[ResponseStreamEvent], translator: ResponseTranslator
    ) -> AsyncIterator[Event]:
        while (raw := await _next_event(sdk_stream)) is not None:
            for event in translator.feed(raw):
                yield event
        yield translator.finish()

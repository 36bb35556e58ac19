"""The OpenAI Responses API adapter (DESIGN §8), on the official ``openai`` SDK.

One package per vendor: :mod:`~arvis.providers.openai.provider` opens the stream
and maps the SDK's failures, :mod:`~arvis.providers.openai.events` checks each
stream event and folds them into a turn, :mod:`~arvis.providers.openai.output`
keeps the output items the deltas built, to compare with the completed response.

Importing this package builds no client and reads no environment; see
:func:`arvis.providers.config.build_provider` for the configured construction.
"""

from arvis.providers.openai.provider import OpenAIProvider, tool_params

__all__ = ["OpenAIProvider", "tool_params"]

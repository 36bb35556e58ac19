"""The ``[provider]`` section of ``arvis.toml`` and the provider it builds.

Example::

    [provider]
    kind = "openai"
    model = "gpt-4.1-mini"
    api_key_env = "ARVIS_OPENAI_KEY"   # default: OPENAI_API_KEY
    base_url = "https://api.openai.com/v1"   # default: OPENAI_BASE_URL, then the SDK's
    max_retries = 2                    # start-up only; never after a stream exists
    timeout_s = 60

    [provider.limits]
    max_argument_bytes = 65536

The environment is passed in, never read here, so building is testable and an
import has no effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arvis.domain.definitions import ToolDefinition
from arvis.domain.errors import ConfigurationError
from arvis.domain.sections import first_error
from arvis.providers.base import ModelProvider, ModelRequest, ProviderLimits

if TYPE_CHECKING:
    from openai import DefaultAsyncHttpxClient

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_BASE_URL_ENV = "OPENAI_BASE_URL"
OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIProviderConfig(BaseModel):
    """``[provider] kind = "openai"``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["openai"]
    model: str = Field(min_length=1, max_length=256)
    """The model every request of this deployment names."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the API key; unset: ``OPENAI_API_KEY``."""
    base_url: str | None = None
    """API base URL; unset: ``OPENAI_BASE_URL``, then the public endpoint."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """SDK retries of the request that opens a stream; nothing is retried after."""
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    """SDK timeout of one HTTP request."""
    instructions: str | None = None
    """Instructions sent with every request, or none."""
    limits: ProviderLimits = ProviderLimits()
    """Bounds on every model call."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return value

    def request(self, prompt: str, tools: Sequence[ToolDefinition]) -> ModelRequest:
        """A request for one turn with this deployment's model, instructions and limits."""
        return ModelRequest(
            model=self.model,
            instructions=self.instructions,
            input=prompt,
            tools=tuple(tools),
            limits=self.limits,
        )


ProviderConfig = OpenAIProviderConfig
"""Every provider kind ARVIS knows (a tagged union once there is a second one)."""


def load_provider_config(section: Mapping[str, Any]) -> ProviderConfig | None:
    """The validated ``[provider]`` section of ``arvis.toml``, or ``None`` when it is empty."""
    raw = dict(section)
    if not raw:
        return None
    if raw.get("kind") != "openai":
        raise ConfigurationError(f"[provider] kind: unknown provider {raw.get('kind')!r}")
    try:
        return OpenAIProviderConfig.model_validate(raw)
    except ValidationError as exc:
        where, message = first_error(exc)
        located = f"provider.{where}" if where else "provider"
        raise ConfigurationError(f"[{located}] {message}") from None


def build_provider(
    section: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    http_client: DefaultAsyncHttpxClient | None = None,
) -> ModelProvider | None:
    """The provider the ``[provider]`` section configures, or ``None`` when it is empty.

    The API key comes from the variable ``api_key_env`` names (default
    ``OPENAI_API_KEY``); the base URL from the config, else ``OPENAI_BASE_URL``,
    else the public endpoint. ``http_client`` is the caller's and trusted as given.
    A missing key stops start-up with a :class:`ConfigurationError`.
    """
    config = load_provider_config(section)
    if config is None:
        return None
    key_env = config.api_key_env or DEFAULT_API_KEY_ENV
    api_key = environ.get(key_env, "").strip()
    if not api_key:
        raise ConfigurationError(f"[provider] the API key variable {key_env} is not set")
    base_url = config.base_url or environ.get(DEFAULT_BASE_URL_ENV) or OPENAI_BASE_URL
    # Imported here so that loading the configuration never imports the SDK.
    from openai import AsyncOpenAI

    from arvis.providers.openai import OpenAIProvider

    client = AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=config.max_retries,
        timeout=config.timeout_s,
        http_client=http_client,
    )
    return OpenAIProvider(client)

"""Settings both clients share: headers, timeouts and the default retry policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import httpx

from arvis import __version__
from arvis.client.retry import RetryPolicy


@dataclass(frozen=True)
class ClientOptions:
    headers: dict[str, str]
    timeout: httpx.Timeout
    retry: RetryPolicy

    # Longer than the server's default request deadline (30 s), so a slow call is
    # answered by ARVIS (503 request_timeout) instead of being abandoned by the client.
    DEFAULT_TIMEOUT: ClassVar[httpx.Timeout] = httpx.Timeout(40.0, connect=5.0)

    @classmethod
    def make(
        cls,
        api_key: str,
        *,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy | None,
        headers: Mapping[str, str] | None,
    ) -> ClientOptions:
        if not api_key or any(c.isspace() for c in api_key):
            raise ValueError(
                "api_key must be an ARVIS API key (arvis_<key id>_<secret>) or a JWT of a"
                " trusted issuer: one bearer token, without spaces"
            )
        merged = {
            "User-Agent": f"arvis-client/{__version__}",
            "Accept": "application/json, application/problem+json",
            **(headers or {}),
            "Authorization": f"Bearer {api_key}",
        }
        return cls(
            headers=merged,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            retry=retry or RetryPolicy(),
        )

"""What the blocking and the asyncio client share: how one is made.

The two differ only in how they wait (``time.sleep`` or ``await``); the requests and
the reading of answers are :mod:`arvis.client._calls`, shared too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import httpx

from arvis.client._options import ClientOptions
from arvis.client.retry import RetryPolicy

HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)


class BaseClient(Generic[HttpT, TransportT]):
    """How either client is made: options, headers and its httpx client (``_open``)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = ClientOptions.DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        limits: httpx.Limits | None = None,
        transport: TransportT | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        options = ClientOptions.make(api_key, timeout=timeout, retry=retry, headers=headers)
        self.retry = options.retry
        self._http: HttpT = self._open(
            base_url=base_url,
            headers=options.headers,
            timeout=options.timeout,
            limits=limits or httpx.Limits(),
            transport=transport,
            follow_redirects=False,
        )

    def _open(self, **settings: Any) -> HttpT:
        """The httpx client of this kind, with ``settings``."""
        raise NotImplementedError

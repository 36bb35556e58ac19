"""What the blocking and the asyncio client share: how one is made, and how it says
what its retries do.

The two differ only in how they wait (``time.sleep`` or ``await``); the requests and
the reading of answers are :mod:`arvis.client._calls`, shared too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Generic, Self, TypeVar

import httpx

from arvis.client._calls import Call
from arvis.client._options import ClientOptions
from arvis.client.errors import ArvisClientError
from arvis.client.retry import Attempts, RetryPolicy

HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)

URL_VARIABLE = "ARVIS_URL"
"""The server's base URL, for :meth:`BaseClient.from_env` and ``arvis`` in remote mode."""
KEY_VARIABLE = "ARVIS_API_KEY"
"""The API key (``arvis_<key id>_<secret>``), likewise."""

log = logging.getLogger("arvis.client")


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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> Self:
        """A client for ``ARVIS_URL`` with the key in ``ARVIS_API_KEY`` (from ``environ``,
        by default the process's), and ``options`` as the constructor takes them. A
        variable that is unset raises ``ValueError`` naming it."""
        environ = os.environ if environ is None else environ
        missing = [name for name in (URL_VARIABLE, KEY_VARIABLE) if not environ.get(name)]
        if missing:
            raise ValueError(f"set {' and '.join(missing)} to reach ARVIS")
        return cls(environ[URL_VARIABLE], environ[KEY_VARIABLE], **options)

    @property
    def base_url(self) -> str:
        return str(self._http.base_url).rstrip("/")

    def _open(self, **settings: Any) -> HttpT:
        """The httpx client of this kind, with ``settings``."""
        raise NotImplementedError

    def _delay(self, attempts: Attempts, call: Call[Any], error: ArvisClientError) -> float:
        """The wait before re-posting ``call`` after ``error``, or raise; says so in the log.

        The first retry of a request is a warning (a silent minute of retries looks like a
        hang); later ones are debug lines."""
        try:
            delay = attempts.after(error, idempotent=call.idempotent)
        except ArvisClientError:
            if attempts.refused_fails_fast(error):
                log.warning(
                    "ARVIS at %s refused the connection; not retrying"
                    " (RetryPolicy(retry_refused=True) waits for a server that is starting)",
                    self.base_url,
                )
            raise
        level = logging.WARNING if attempts.count == 1 else logging.DEBUG
        log.log(
            level,
            "%s %s%s failed (%s); re-posting it unchanged in %.2fs, for up to %gs in all",
            call.method,
            self.base_url,
            call.path,
            error.code,
            delay,
            attempts.policy.total_s,
        )
        return delay

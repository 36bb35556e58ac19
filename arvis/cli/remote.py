"""Remote mode: the run commands over HTTP, through :mod:`arvis.client`.

With ``--url`` (or ``ARVIS_URL``) and ``--key`` (or ``ARVIS_API_KEY``), ``runs``,
``journal``, ``verify``, ``replay``, ``resolve``, ``export`` and ``keys`` ask a served ARVIS instead
of opening the database: an operator needs the server's URL and a key of the right
role, never the database's credentials. The key decides the tenant (``--tenant`` is
the local mode's), and the answers are the ones the API gives, printed as the local
mode prints its own (docs/http.md, docs/client.md).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

import typer

from arvis.cli.common import fail
from arvis.client import ArvisClient, ArvisClientError, ConnectFailed
from arvis.client._base import KEY_VARIABLE, URL_VARIABLE

T = TypeVar("T")

TENANT_VARIABLE = "ARVIS_TENANT"

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_VARIABLE,
        help=f"Ask the ARVIS server at this URL (remote mode) instead of the database;"
        f" default: {URL_VARIABLE}.",
        show_default=False,
    ),
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        envvar=KEY_VARIABLE,
        help=f"The API key of remote mode (its tenant is the tenant); default: {KEY_VARIABLE}.",
        show_default=False,
    ),
]


def tenant_option(whose: str) -> Any:
    """The ``--tenant`` option of a local-or-remote command, whose help says what the
    tenant's is (``whose``): read from ``ARVIS_TENANT`` locally, the key's remotely."""
    return typer.Option(
        envvar=TENANT_VARIABLE,
        help=f"The tenant whose {whose}; default: {TENANT_VARIABLE}. Remote mode: the key's.",
        show_default=False,
    )


TenantOption = Annotated[str | None, tenant_option("run this is")]


@dataclass(frozen=True)
class Remote:
    """Where remote mode sends its requests, and with which key."""

    url: str
    key: str

    def call(self, use: Callable[[ArvisClient], T]) -> T:
        """``use`` a client of this server; every client error becomes one line, exit 1."""
        # The CLI says what failed in its own one line; the client's retry log would
        # only repeat it.
        logging.getLogger("arvis.client").setLevel(logging.ERROR)
        try:
            client = ArvisClient(self.url, self.key)
        except ValueError as exc:
            fail(f"{KEY_VARIABLE}: {exc}", 2)
        with client:
            try:
                return use(client)
            except ConnectFailed as exc:
                fail(f"cannot reach ARVIS at {client.base_url}: {exc.message}")
            except ArvisClientError as exc:
                fail(exc.message)


def remote_capable(command: Callable[..., T]) -> Callable[..., T]:
    """``command`` with ``--url`` and ``--key`` added to its options; it is called with
    ``server``, the :class:`Remote` they name, or None in local mode.

    One place for the two options and their rule (a URL needs a key), instead of the
    same two parameters and the same first line in every command that can go remote.
    """
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "server"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
        for name, option in (("url", UrlOption), ("key", KeyOption))
    ]

    @functools.wraps(command)
    def with_server(*args: Any, url: str | None = None, key: str | None = None, **kw: Any) -> T:
        return command(*args, server=remote(url, key), **kw)

    # Typer reads the options from the signature and the (resolved) annotations.
    # (A function's __signature__ is read by inspect, and typed nowhere.)
    cast(Any, with_server).__signature__ = signature.replace(parameters=[*kept, *added])
    with_server.__annotations__ = {
        **{k: v for k, v in command.__annotations__.items() if k != "server"},
        "url": UrlOption,
        "key": KeyOption,
    }
    return with_server


def remote(url: str | None, key: str | None) -> Remote | None:
    """Remote mode when a URL is given; it needs a key (exit 2 without one)."""
    if not url:
        return None
    if not key:
        fail(f"--url needs an API key: --key or {KEY_VARIABLE}", 2)
    return Remote(url, key)


def local_tenant(tenant: str | None) -> str:
    """The tenant a local command reads: ``--tenant`` or ``ARVIS_TENANT`` (exit 2 without)."""
    if not tenant:
        fail(
            f"name the tenant with --tenant or {TENANT_VARIABLE}"
            f" (or ask a server: --url/{URL_VARIABLE} with --key/{KEY_VARIABLE})",
            2,
        )
    return tenant

"""ARVIS's side of the test identity provider: the ``[[auth.oidc]]`` entry trusting it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import OidcProvider


def trust(issuer: str, **extra: str | int) -> str:
    """The ``arvis.toml`` entry trusting ``issuer`` as the tests' provider names its claims
    (tenant, arvis_roles, groups); ``extra`` are more keys of the entry."""
    more = "".join(f"{name} = {value!r}\n".replace("'", '"') for name, value in extra.items())
    return f"""
[[auth.oidc]]
issuer = "{issuer}"
audience = "arvis"
tenant_claim = "tenant"
roles_claim = "arvis_roles"
groups_claim = "groups"
{more}"""


CONSOLE_SECRET_ENV = "ARVIS_TEST_CONSOLE_OIDC_SECRET"


@contextmanager
def serving_console_sign_in(
    database_url: str, data_dir: Path, idp: OidcProvider
) -> Iterator[Served]:
    """ARVIS trusting ``idp`` with the console's sign-in through it ("Sign in with the test
    provider", the ``arvis-console`` client), its callback registered at the provider."""
    os.environ[CONSOLE_SECRET_ENV] = idp.client("arvis-console")["client_secret"]
    config = trust(
        idp.issuer,
        console_client_id="arvis-console",
        console_client_secret_env=CONSOLE_SECRET_ENV,
        console_name="the test provider",
    )
    try:
        with serve_arvis(database_url, data_dir, config) as served:
            idp.add_console_redirects(
                [f"{served.url}/console/oidc/callback"], [f"{served.url}/console/sign-in"]
            )
            yield served
    finally:
        os.environ.pop(CONSOLE_SECRET_ENV, None)

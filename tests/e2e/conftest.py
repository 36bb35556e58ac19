from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from arvis.client import AsyncArvisClient
from tests.support.client import asgi_client
from tests.support.http import Api, serve_api
from tests.support.identity import serving_console_sign_in
from tests.support.mcp_client import Served
from tests.support.oidc import OidcProvider


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with serve_api(database_url, tmp_path_factory.mktemp("arvis-data")) as served:
        yield served


# The agent-framework modules' fixtures: each module serves its own ``api`` (and
# ``data_dir``), which these take.


@pytest.fixture
def sandbox(data_dir: Path) -> Callable[[str], str | None]:
    """The text of a file of the deployment's sandbox, or None when there is none."""

    def read(name: str) -> str | None:
        path = data_dir / "sandbox" / name
        return path.read_text() if path.exists() else None

    return read


@pytest.fixture
async def agent_client(api: Api) -> AsyncIterator[AsyncArvisClient]:
    async with asgi_client(api) as client:
        yield client


@pytest.fixture
async def approver(api: Api) -> AsyncIterator[AsyncArvisClient]:
    async with asgi_client(api, "acme:approver") as client:
        yield client


@pytest.fixture(scope="module")
def oidc_console(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    """ARVIS served with the console's sign-in through the session's provider."""
    data_dir = tmp_path_factory.mktemp("arvis-console-oidc")
    with serving_console_sign_in(database_url, data_dir, oidc_provider) as served:
        yield served

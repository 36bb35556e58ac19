from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from arvis.client import AsyncArvisClient
from tests.support.client import asgi_client
from tests.support.http import Api, serve_api


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

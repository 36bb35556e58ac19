from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.http import Api, serve_api


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with serve_api(database_url, tmp_path_factory.mktemp("arvis-data")) as served:
        yield served

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.lifecycle import Harness, make_harness


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    built = await make_harness(database_url)
    try:
        yield built
    finally:
        await built.close()

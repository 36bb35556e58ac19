from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.fakelifecycle import FakeHarness, make_fake_harness


@pytest.fixture
async def harness() -> AsyncIterator[FakeHarness]:
    built = await make_fake_harness()
    try:
        yield built
    finally:
        await built.close()

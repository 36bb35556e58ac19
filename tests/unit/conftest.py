"""The unit tier runs without PostgreSQL (``make test-unit``): a test here that asks for one
of the database fixtures fails at collection, naming the tier it belongs in."""

from __future__ import annotations

from pathlib import Path

import pytest

_DATABASE_FIXTURES = "tests.support.postgres"
_UNIT = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The hook sees every item of the session, not only this folder's.
    for item in items:
        if not item.path.resolve().is_relative_to(_UNIT):
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name, defs in info.name2fixturedefs.items():
            if any(getattr(d.func, "__module__", "") == _DATABASE_FIXTURES for d in defs):
                raise pytest.UsageError(
                    f"{item.nodeid} asks for the database fixture {name!r}: it is not a unit "
                    "test; put it in tests/integration"
                )

"""An in-memory lifecycle store (issue 24): the lifecycle's rules run on it in milliseconds,
and a contract test holds it to the PostgreSQL store's answers."""

from tests.support.fakestore.base import FakeDatabase
from tests.support.fakestore.reads import FakeReads
from tests.support.fakestore.store import FakeLifecycleStore

__all__ = ["FakeDatabase", "FakeLifecycleStore", "FakeReads"]

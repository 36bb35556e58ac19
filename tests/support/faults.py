"""A lifecycle store that fails on purpose: for outage tests, composed in, never patched."""

from __future__ import annotations

from typing import Any

from arvis.domain.errors import StoreUnavailable
from arvis.lifecycle.ports import LifecycleStore


class FlakyStore:
    """Delegates to a real :class:`LifecycleStore`; the operations named in ``down``
    fail as an unreachable database would, before reaching it."""

    def __init__(self, inner: LifecycleStore) -> None:
        self._inner = inner
        self.down: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        async def operation(*args: Any, **kwargs: Any) -> Any:
            if name in self.down:
                raise StoreUnavailable("the database is unreachable (test)")
            return await attribute(*args, **kwargs)

        return operation if name != "reading" else attribute

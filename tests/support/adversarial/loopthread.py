"""An asyncio event loop on a thread of its own, for servers that must answer whatever the
test's loop (or a blocking subprocess call) is doing meanwhile."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """``with LoopThread() as loop: loop.run(coro)`` runs ``coro`` there and waits for it."""

    def __init__(self, name: str = "adversarial-stubs") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._forever, name=name, daemon=True)

    def _forever(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.run(_cancel_the_rest(), timeout_s=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=30)
            self.loop.close()


async def _cancel_the_rest() -> None:
    """Cancel every other task of the loop (hung handlers) and wait for them to end."""
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)

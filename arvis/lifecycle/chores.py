"""A process's periodic work, each chore on its own interval (DESIGN §6).

The lease's heartbeat and recovery's sweep are chores of :class:`RecoveryRuntime`;
the expiry sweep, the webhook deliverer and the idle checkpointer are the kernel's,
each scheduled here by the composition that owns it. A chore that fails is logged
and tried again at its next interval: an outage is not a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from arvis.domain.errors import ArvisError

log = logging.getLogger(__name__)

Chore = tuple[float, Callable[[], Awaitable[object]]]
"""(interval in seconds, the action)."""


class Chores:
    """Runs each chore every interval until stopped."""

    def __init__(self, chores: Sequence[Chore] = ()) -> None:
        self.chores = list(chores)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(_every(interval, action)) for interval, action in self.chores
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []


async def _every(interval_s: float, action: Callable[[], Awaitable[object]]) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await action()
        except ArvisError as exc:
            # A store outage or a refused step: keep going once it ends.
            log.warning("background %s failed: %s", _name(action), exc.message)
        except Exception:
            log.exception("background %s failed", _name(action))


def _name(action: object) -> str:
    return str(getattr(action, "__name__", type(action).__name__))

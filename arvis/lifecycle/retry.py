"""Whole-transaction retries (STYLE: retry whole transactions only)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from arvis.domain.errors import SerializationConflict, StoreUnavailable

T = TypeVar("T")


async def retry_transaction(
    step: Callable[[], Awaitable[T]],
    *,
    attempts: int = 4,
    base_delay_s: float = 0.02,
    on: tuple[type[Exception], ...] = (StoreUnavailable, SerializationConflict),
    slow_failure_s: float = 1.0,
) -> T:
    """Run a whole transactional step again on connection or serialization failures.

    The step must take its ids and timestamps from outside, so a retry repeats
    the same logical write. Only quick failures are retried (a pooled connection
    that died in a restart): one that took ``slow_failure_s`` or more waited for
    a database that is not there, and retrying it would multiply the caller's
    wait past the request deadline.
    """
    loop = asyncio.get_running_loop()
    for attempt in range(1, attempts + 1):
        started = loop.time()
        try:
            return await step()
        except on:
            if attempt == attempts or loop.time() - started >= slow_failure_s:
                raise
            # Full jitter: spreads retries of many clients hitting one restart.
            await asyncio.sleep(random.uniform(0, base_delay_s * 2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover

"""Re-posting the identical request after a lost answer or a retryable problem.

Re-posting a syscall is the safe thing by design (DESIGN §4): the same run id, causal
id, tool and payload derive the same idempotency key, so ARVIS answers the recorded
result (``deduplicated``), refuses a repeat of an uncertain unsafe effect, or runs an
attempt that provably never started. The helper therefore never changes a byte of the
request — least of all the causal id: a new causal id would be a new decision, and the
one thing that can run an effect twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from arvis.client.errors import (
    AnswerLost,
    ArvisClientError,
    AttemptInFlight,
    ConnectFailed,
    RequestTimeout,
    RetryExhausted,
    UnexpectedAnswer,
)

__all__ = ["NO_RETRY", "Attempts", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How long, and how often, to re-post a request that got no usable answer.

    Retried: a connection that failed or an answer that was lost, the retryable
    problems (``store_unavailable``, ``shutting_down``, ``request_timeout`` and the other
    503s), ``attempt_in_flight`` (waited out: the attempt is still running), and a 502,
    503 or 504 from a proxy in between. Everything else is raised at once.

    A refused connection is raised at once unless ``retry_refused`` is set.

    The delay before retry *n* is ``min(max_backoff_s, initial_backoff_s * multiplier**n)``
    scaled by a random factor in ``[1 - jitter, 1]``, so many clients that lost the same
    server do not come back in step. When ``total_s`` would be exceeded, or after
    ``max_attempts`` attempts, :class:`~arvis.client.errors.RetryExhausted` is raised.
    """

    total_s: float = 60.0
    """The whole budget, first attempt included; sized to ride out a restart."""
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_attempts: int | None = None
    """None: bounded by ``total_s`` only."""
    retry_refused: bool = False
    """Whether a refused connection (nothing listens at the URL) is retried like the
    rest. Off by default: a wrong URL or a server that is down fails at once with
    :class:`~arvis.client.errors.ConnectFailed` instead of after ``total_s``. Turn it on
    where the server may be starting or restarting (a per-turn sidecar, a rollout)."""

    def __post_init__(self) -> None:
        if self.total_s < 0 or self.initial_backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("retry times must not be negative")
        if self.multiplier < 1:
            raise ValueError("multiplier must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def start(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> Attempts:
        """The bookkeeping of one retried request."""
        return Attempts(self, clock=clock, rng=rng)


NO_RETRY = RetryPolicy(max_attempts=1)
"""One attempt; every error is raised as it comes."""


def retryable(error: ArvisClientError, *, idempotent: bool) -> bool:
    """Whether re-posting may change the answer and cannot do harm.

    A request that is not idempotent (an approval, a denial) is repeated only when it
    certainly did nothing: never after a lost answer or a server-side timeout."""
    if isinstance(error, UnexpectedAnswer):
        return error.gateway and idempotent
    if not error.retryable:
        return False
    if idempotent:
        return True
    return not isinstance(error, AnswerLost | RequestTimeout | AttemptInFlight)


def _may_have_run(error: ArvisClientError) -> bool:
    return isinstance(error, AnswerLost | RequestTimeout | AttemptInFlight) or (
        isinstance(error, UnexpectedAnswer) and error.status == 504
    )


class Attempts:
    """The retry state of one request: how many attempts, how long so far, what next."""

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._rng = rng
        self._started = clock()
        self.count = 0
        self.outcome_unknown = False

    def attempt(self) -> None:
        """Note that an attempt is being made."""
        self.count += 1

    def after(self, error: ArvisClientError, *, idempotent: bool = True) -> float:
        """The delay before the next attempt, or raise: ``error`` itself when it is not
        worth retrying, :class:`RetryExhausted` when the budget is spent."""
        if _may_have_run(error):
            self.outcome_unknown = True
        if self.refused_fails_fast(error) or not retryable(error, idempotent=idempotent):
            raise error
        policy = self.policy
        elapsed = self._clock() - self._started
        ceiling = min(
            policy.max_backoff_s,
            policy.initial_backoff_s * policy.multiplier ** max(self.count - 1, 0),
        )
        delay = ceiling * (1 - policy.jitter * self._rng())
        spent = policy.max_attempts is not None and self.count >= policy.max_attempts
        if spent or elapsed + delay > policy.total_s:
            if policy.max_attempts == 1:
                raise error
            raise RetryExhausted(
                error,
                attempts=self.count,
                elapsed_s=elapsed,
                outcome_unknown=self.outcome_unknown,
            ) from error
        return delay

    def refused_fails_fast(self, error: ArvisClientError) -> bool:
        """Whether ``error`` is a refused connection this policy does not retry."""
        return isinstance(error, ConnectFailed) and error.refused and not self.policy.retry_refused

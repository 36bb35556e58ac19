"""The retry rules: what is retried, how long it waits, when it gives up."""

from __future__ import annotations

import pytest

from arvis.client import (
    NO_RETRY,
    AnswerLost,
    ArvisClientError,
    ArvisProblem,
    ConnectFailed,
    RetryExhausted,
    RetryPolicy,
    UnexpectedAnswer,
)
from arvis.client.errors import problem_error


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _problem(code: str, status: int) -> ArvisProblem:
    return problem_error(status, {"code": code, "status": status, "detail": code})


def test_backoff_grows_to_its_cap_and_never_exceeds_it() -> None:
    clock = FakeClock()
    policy = RetryPolicy(total_s=1000, initial_backoff_s=0.1, max_backoff_s=1.0, jitter=0)
    attempts = policy.start(clock=clock, rng=lambda: 0.0)
    delays = []
    for _ in range(7):
        attempts.attempt()
        delays.append(attempts.after(ConnectFailed("refused")))

    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_jitter_only_ever_shortens_the_wait() -> None:
    policy = RetryPolicy(initial_backoff_s=1.0, max_backoff_s=1.0, jitter=0.5)
    attempts = policy.start(clock=FakeClock(), rng=lambda: 1.0)
    attempts.attempt()

    assert attempts.after(ConnectFailed("refused")) == pytest.approx(0.5)


def test_the_total_budget_ends_the_retries_and_says_the_outcome_is_unknown() -> None:
    clock = FakeClock()
    attempts = RetryPolicy(total_s=5, jitter=0).start(clock=clock)
    attempts.attempt()
    attempts.after(AnswerLost("reset"))
    clock.now = 5.0
    attempts.attempt()
    lost = AnswerLost("reset again")

    with pytest.raises(RetryExhausted) as caught:
        attempts.after(lost)

    assert caught.value.last is lost
    assert caught.value.attempts == 2
    assert caught.value.outcome_unknown


def test_running_out_on_refused_connections_does_not_claim_an_unknown_outcome() -> None:
    clock = FakeClock()
    attempts = RetryPolicy(max_attempts=2).start(clock=clock)
    attempts.attempt()
    attempts.after(ConnectFailed("refused"))
    attempts.attempt()

    with pytest.raises(RetryExhausted) as caught:
        attempts.after(_problem("store_unavailable", 503))

    assert not caught.value.outcome_unknown


@pytest.mark.parametrize(
    "error",
    [
        ConnectFailed("refused"),
        AnswerLost("reset"),
        _problem("store_unavailable", 503),
        _problem("shutting_down", 503),
        _problem("request_timeout", 503),
        _problem("attempt_in_flight", 409),
        UnexpectedAnswer(502, "bad gateway"),
    ],
)
def test_a_lost_answer_and_the_retryable_problems_are_retried(error: ArvisClientError) -> None:
    attempts = RetryPolicy().start()
    attempts.attempt()

    assert attempts.after(error) >= 0


@pytest.mark.parametrize(
    "error",
    [
        _problem("not_found", 404),
        _problem("unauthenticated", 401),
        _problem("validation_error", 422),
        _problem("causal_id_conflict", 409),
        _problem("internal_error", 500),
        UnexpectedAnswer(200, "the answer is not JSON"),
    ],
)
def test_an_answer_that_will_not_change_is_raised_at_once(error: ArvisClientError) -> None:
    attempts = RetryPolicy().start()
    attempts.attempt()

    with pytest.raises(type(error)) as caught:
        attempts.after(error)

    assert caught.value is error


@pytest.mark.parametrize(
    "error", [AnswerLost("reset"), _problem("request_timeout", 503), UnexpectedAnswer(504, "")]
)
def test_an_approval_is_not_repeated_when_it_may_have_happened(error: ArvisClientError) -> None:
    attempts = RetryPolicy().start()
    attempts.attempt()

    with pytest.raises(type(error)):
        attempts.after(error, idempotent=False)


def test_an_approval_is_repeated_when_it_certainly_did_nothing() -> None:
    attempts = RetryPolicy().start()
    attempts.attempt()

    assert attempts.after(ConnectFailed("refused"), idempotent=False) >= 0
    assert attempts.after(_problem("store_unavailable", 503), idempotent=False) >= 0


def test_no_retry_raises_the_error_itself() -> None:
    attempts = NO_RETRY.start()
    attempts.attempt()
    lost = AnswerLost("reset")

    with pytest.raises(AnswerLost) as caught:
        attempts.after(lost)

    assert caught.value is lost


def test_a_policy_that_makes_no_sense_is_refused() -> None:
    with pytest.raises(ValueError, match="multiplier"):
        RetryPolicy(multiplier=0.5)
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)

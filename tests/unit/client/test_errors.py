"""Every problem answer becomes a typed exception carrying its stable code."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.client import (
    ArvisProblem,
    AttemptInFlight,
    ChainBroken,
    InvalidRequest,
    SelfApproval,
    ServiceUnavailable,
    ShuttingDown,
    Unauthenticated,
    ValidationFailed,
)
from arvis.client.errors import problem_error


def _problem(code: str, status: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": f"urn:arvis:problem:{code}",
        "title": code.replace("_", " "),
        "status": status,
        "detail": f"detail of {code}",
        "code": code,
        **extra,
    }


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("unauthenticated", 401, Unauthenticated),
        ("self_approval", 403, SelfApproval),
        ("attempt_in_flight", 409, AttemptInFlight),
        ("shutting_down", 503, ShuttingDown),
        ("validation_error", 422, ValidationFailed),
    ],
)
def test_a_known_code_raises_its_own_class_with_the_answer_on_it(
    code: str, status: int, kind: type[ArvisProblem]
) -> None:
    body = _problem(code, status)
    error = problem_error(status, body)

    assert type(error) is kind
    assert (error.code, error.status, error.detail, error.body) == (
        code,
        status,
        f"detail of {code}",
        body,
    )


def test_chain_broken_names_the_position_where_the_chain_breaks() -> None:
    error = problem_error(409, _problem("chain_broken", 409, broken_at=7))

    assert isinstance(error, ChainBroken)
    assert error.broken_at == 7


def test_validation_failed_carries_where_the_request_was_wrong() -> None:
    errors = [{"path": "body.run_id", "message": "bad", "type": "string_pattern_mismatch"}]
    error = problem_error(422, _problem("validation_error", 422, errors=errors))

    assert isinstance(error, ValidationFailed)
    assert error.errors == errors


def test_an_unknown_503_code_keeps_its_code_and_is_still_retryable() -> None:
    error = problem_error(503, _problem("plan_unavailable", 503))

    assert error.code == "plan_unavailable"
    assert isinstance(error, ServiceUnavailable)
    assert error.retryable
    # The same code gets the same class, so it can be caught by type.
    assert type(problem_error(503, _problem("plan_unavailable", 503))) is type(error)


def test_an_unknown_422_code_is_an_invalid_request_that_is_never_retried() -> None:
    error = problem_error(422, _problem("payload_too_clever", 422))

    assert isinstance(error, InvalidRequest)
    assert error.code == "payload_too_clever"
    assert not error.retryable


def test_a_problem_without_a_usable_code_falls_back_to_its_family() -> None:
    assert type(problem_error(503, {"detail": "down"})) is ServiceUnavailable
    assert type(problem_error(418, {"code": "Not A Code!"})) is ArvisProblem

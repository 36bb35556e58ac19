"""What the OpenAI Agents integration tells the model, and the ids and names it uses."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from arvis.client.models import ANSWER
from arvis.integrations.openai_agents import (
    DO_NOT_RETRY,
    causal_id_for_call,
    model_name,
    model_output,
)
from arvis.integrations.openai_agents._render import strict_eligible

ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _answer(**fields: Any) -> Any:
    base = {
        "outcome": "executed",
        "boundary": "EFFECT_COMPLETED",
        "idempotency_key": "k",
        "run_id": "r",
        "causal_id": "c",
    }
    return ANSWER.validate_python(base | fields)


def test_a_call_id_that_is_a_valid_id_is_the_causal_id_itself() -> None:
    assert causal_id_for_call("call_AbC123") == "call_AbC123"


@pytest.mark.parametrize("call_id", ["call id with spaces", "x" * 300, "fc/äöü", "", ".", ".."])
def test_any_other_call_id_gets_a_stable_valid_causal_id(call_id: str) -> None:
    derived = causal_id_for_call(call_id)

    assert ID.fullmatch(derived)
    assert derived not in (".", "..")
    assert derived == causal_id_for_call(call_id)
    assert derived != causal_id_for_call(call_id + "!")


@pytest.mark.parametrize("boundary", ["EFFECT_STARTED", "EFFECT_STATE_UNKNOWN"])
def test_an_uncertain_outcome_tells_the_model_not_to_retry(boundary: str) -> None:
    problem = {"code": "lost_track", "detail": "gone quiet", "effect_started": None}
    told = json.loads(model_output(_answer(boundary=boundary, problem=problem)))

    assert told["status"] == "uncertain"
    assert told["instruction"] == DO_NOT_RETRY
    assert "Do not retry" in DO_NOT_RETRY


def test_a_refused_repeat_of_an_uncertain_effect_is_uncertain_too() -> None:
    answer = _answer(
        outcome="refused", boundary="PRE_EFFECT_REFUSAL", reason="retry_prohibited_uncertain"
    )

    assert json.loads(model_output(answer))["instruction"] == DO_NOT_RETRY


def test_a_completed_call_is_its_result_and_a_problem_says_what_went_wrong() -> None:
    assert json.loads(model_output(_answer(result={"bytes": 2}))) == {"bytes": 2}
    problem = {"code": "not_found", "detail": "no such file", "effect_started": False}
    told = json.loads(model_output(_answer(boundary="EFFECT_NOT_STARTED", problem=problem)))
    assert (told["status"], told["problem"]["code"]) == ("not_started", "not_found")


def test_a_refusal_names_its_reason() -> None:
    answer = _answer(outcome="refused", boundary="PRE_EFFECT_REFUSAL", reason="policy_denied")

    assert json.loads(model_output(answer))["reason"] == "policy_denied"


def test_a_failure_passes_on_the_tools_retry_advice() -> None:
    retry = {"code": "busy", "detail": "try later", "retryable": True}
    final = {"code": "rejected", "detail": "no", "retryable": False}

    assert "trying again" in model_output(_answer(boundary="EFFECT_FAILED", problem=retry))
    assert "Do not retry" in model_output(_answer(boundary="EFFECT_FAILED", problem=final))


def test_dotted_arvis_names_become_names_a_model_may_call() -> None:
    assert model_name("files.append") == "files_append"
    with pytest.raises(ValueError, match="explicit"):
        model_name("a" * 65)


def test_only_a_schema_strict_mode_leaves_unchanged_is_sent_strict() -> None:
    strict = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    assert strict_eligible(strict)
    # An optional property would become required in strict mode.
    assert not strict_eligible({**strict, "properties": {**strict["properties"], "n": {}}})
    # A keyword strict mode does not take.
    assert not strict_eligible(
        {**strict, "properties": {"path": {"type": "string", "maxLength": 9}}}
    )
    assert not strict_eligible({"type": "object"})

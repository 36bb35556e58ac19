"""The causal ids of the LangGraph integration: stable per step and call, always ARVIS ids."""

from __future__ import annotations

import re

from arvis.integrations.langgraph import causal_id_for_step

ARVIS_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def test_a_call_of_one_step_always_gets_the_same_causal_id() -> None:
    assert causal_id_for_step(3, "call_a", 0, "files.write") == "s3.call_a"
    assert causal_id_for_step(3, "call_a", 0, "files.write") == causal_id_for_step(
        3, "call_a", 5, "echo"
    )


def test_the_same_call_id_in_another_step_is_another_decision() -> None:
    assert causal_id_for_step(3, "call_0", 0, "echo") != causal_id_for_step(5, "call_0", 0, "echo")


def test_a_call_without_an_id_is_named_by_its_place_and_tool() -> None:
    assert causal_id_for_step(2, None, 1, "echo") == "s2.1.echo"
    assert causal_id_for_step(2, "", 0, "echo") != causal_id_for_step(2, "", 1, "echo")


def test_an_id_arvis_would_refuse_becomes_a_digest() -> None:
    made = causal_id_for_step(1, "call/with spaces" + "x" * 200, 0, "echo")
    assert made.startswith("call-sha256:")
    assert ARVIS_ID.fullmatch(made)

"""The declarative error classes: a class states its code and fields, the base builds it."""

from __future__ import annotations

import pytest

from arvis.domain.errors import ArvisError, DefinitionError, IntegrityConflict, PayloadError
from arvis.lifecycle.errors import ChainBroken
from arvis.tools.errors import PlanMismatch, PlanUnavailable
from arvis.tools.mcp.upstream import UpstreamChanged


def test_fields_are_the_constructor_in_order_and_fill_the_message() -> None:
    exc = DefinitionError("t", "must not be empty")
    assert (exc.tool, exc.rule) == ("t", "must not be empty")
    assert exc.message == str(exc) == "tool 't': must not be empty"
    assert exc.args == (exc.message,)
    assert repr(exc) == "DefinitionError(\"tool 't': must not be empty\")"


def test_defaults_and_a_message_field() -> None:
    assert PayloadError("too deep").message == "payload $: too deep"
    conflict = IntegrityConflict("refused", None)
    assert (conflict.message, conflict.constraint) == ("refused", None)


def test_a_computed_part_of_the_message() -> None:
    assert str(PlanUnavailable(None)) == "the tool plan source failed to lease the current plan"
    assert str(PlanMismatch(None, "p1", "bad")) == "tool plan p1: bad (wanted the current plan)"


def test_attributes_callers_read() -> None:
    broken = ChainBroken("run-1", 7, "hash mismatch")
    assert (broken.broken_at, broken.reason, broken.code) == (7, "hash mismatch", "chain_broken")
    changed = UpstreamChanged("srv", "echo")
    assert "restart ARVIS" in changed.message
    assert changed.tool == "echo"


def test_errors_stay_hashable_and_compare_by_identity() -> None:
    a, b = DefinitionError("t", "r"), DefinitionError("t", "r")
    assert a != b
    assert len({a, b}) == 2


def test_code_is_a_class_keyword() -> None:
    class Probe(ArvisError, code="probe_code"):
        """A probe."""

    assert Probe.code == "probe_code"
    assert Probe("m").message == "m"
    with pytest.raises(TypeError):
        DefinitionError("only one")  # type: ignore[call-arg]

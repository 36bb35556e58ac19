"""One loader for ``package.module:attribute``: the audit sink and tool factories."""

from __future__ import annotations

import json

import pytest

from arvis.config import load_object
from arvis.domain.errors import ConfigurationError
from arvis.domain.loading import is_attribute_spec, load_attribute
from arvis.tools.registry import load_factory


def test_a_dotted_attribute_is_walked() -> None:
    assert load_attribute("json:JSONDecoder.decode", "[x]") is json.JSONDecoder.decode


@pytest.mark.parametrize("spec", ["json", "json:", ":dumps", "a-b:c", "json:dumps()"])
def test_specs_that_name_no_attribute(spec: str) -> None:
    assert not is_attribute_spec(spec)


def test_both_callers_say_where_in_the_same_words() -> None:
    with pytest.raises(ConfigurationError, match=r"^\[audit\] 'json:nope': no 'nope' there$"):
        load_object("json:nope", "audit")
    with pytest.raises(ConfigurationError, match=r"^\[tools\] factory 'json:nope': no callable"):
        load_factory("json:nope")
    with pytest.raises(ConfigurationError, match=r"^\[audit\] 'no_such_mod:x': cannot import"):
        load_object("no_such_mod:x", "audit")


def test_a_factory_must_be_callable_an_object_need_not() -> None:
    assert load_object("json:__name__", "audit") == "json"
    with pytest.raises(ConfigurationError, match="no callable '__name__' there"):
        load_factory("json:__name__")

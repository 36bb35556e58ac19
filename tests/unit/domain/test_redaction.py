"""``[journal] redact``: which fields are stored as their digest, and which paths are valid."""

from __future__ import annotations

import pytest

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.errors import ConfigurationError
from arvis.domain.redaction import REDACTED, Redaction


def _digest(value: object) -> dict[str, str]:
    return {REDACTED: "sha256:" + sha256_hex(canonical_bytes(value))}


def test_a_named_field_becomes_the_digest_of_its_canonical_value() -> None:
    rule = Redaction.from_section({"redact": ["card.number", "token"]})
    payload = {"card": {"number": "4111", "holder": "Ann"}, "token": {"b": 1, "a": 2}, "n": 1}
    assert rule.apply(payload) == {
        "card": {"number": _digest("4111"), "holder": "Ann"},
        "token": _digest({"a": 2, "b": 1}),
        "n": 1,
    }
    assert payload["card"] == {"number": "4111", "holder": "Ann"}  # a new value


def test_arrays_apply_the_rest_of_the_path_to_each_element_and_star_is_any_key() -> None:
    rule = Redaction.from_section({"redact": ["items.secret", "headers.*"]})
    payload = {"items": [{"secret": 1, "k": 2}, {"k": 3}], "headers": {"a": "x", "b": "y"}}
    assert rule.apply(payload) == {
        "items": [{"secret": _digest(1), "k": 2}, {"k": 3}],
        "headers": {"a": _digest("x"), "b": _digest("y")},
    }


def test_a_path_that_is_not_there_changes_nothing() -> None:
    rule = Redaction.from_section({"redact": ["a.b.c"]})
    assert rule.apply({"a": "text", "z": [1]}) == {"a": "text", "z": [1]}
    assert not Redaction.from_section({})


@pytest.mark.parametrize(
    "section",
    [{"redact": [""]}, {"redact": ["a..b"]}, {"redact": ["a*"]}, {"redact": "a"}, {"other": 1}],
)
def test_a_bad_section_stops_start_up_naming_it(section: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match=r"^\[journal\]"):
        Redaction.from_section(section)

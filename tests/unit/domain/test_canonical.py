"""canonical_bytes is RFC 8785 byte for byte: the fast encoder never differs from
the reference implementation, on any value, and refuses what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from arvis.domain.canonical import MAX_SAFE_INTEGER, canonical_bytes
from arvis.domain.errors import PayloadError

# Any text, surrogates and control characters included; keys from the same.
_text = st.text(st.characters(codec=None), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER - 3, max_value=MAX_SAFE_INTEGER + 3)
    | st.integers(min_value=-1000, max_value=1000)
    | st.floats()
    | _text
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text, inner, max_size=5),
    max_leaves=30,
)


def _reference(value: Any) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError):
        return PayloadError


def _ours(value: Any) -> bytes | type[Exception]:
    try:
        return canonical_bytes(value)
    except PayloadError:
        return PayloadError


@settings(max_examples=500, deadline=None)
@given(_values)
def test_identical_to_the_reference_implementation(value: Any) -> None:
    assert _ours(value) == _reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, "x"], "é": "ü", "\U0001f600": 1, "\ufb01": 2},
        {"text": 'tab\t nl\n cr\r bs\b ff\f ctl\x01\x1f del\x7f quote" back\\ \u2028'},
        [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 0, -0],
        {"n": 1.5, "big": 1e21, "small": 5e-324},
        ("tuple", ["nested", {"k": ()}]),
    ],
)
def test_known_values_match(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value", ["lone \ud800", {"\udc00": 1}, {"k": 2**53}, {1: "non-string key"}]
)
def test_what_jcs_refuses_is_a_payload_error(value: Any) -> None:
    with pytest.raises(PayloadError):
        canonical_bytes(value)

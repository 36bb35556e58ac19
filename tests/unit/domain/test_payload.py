"""Frozen effect payloads: RFC 8785 bytes and their digest (DESIGN §1)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from arvis.domain.canonical import MAX_SAFE_INTEGER, canonical_bytes
from arvis.domain.errors import PayloadError
from arvis.domain.payload import FrozenEffectPayload, freeze_payload

leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=20,
    )
)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.text(
                alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                max_size=8,
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


def permuted(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: permuted(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [permuted(item, rng) for item in value]
    return value


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every scalar, and to every empty container (which is a value too)."""
    if not value and isinstance(value, dict | list):
        return [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in leaf_paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in leaf_paths(item, (*path, index))]
    return [path]


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: replaced(value[head], rest, new)}
    copy = list(value)
    copy[head] = replaced(value[head], rest, new)
    return copy


@given(json_values, st.randoms(use_true_random=False), st.sampled_from([None, 0, 2, "\t"]))
def test_permuted_keys_and_whitespace_give_the_same_digest(
    value: Any, rng: random.Random, indent: int | str | None
) -> None:
    reformatted = json.loads(json.dumps(permuted(value, rng), indent=indent, separators=None))
    assert freeze_payload(reformatted).digest == freeze_payload(value).digest


@given(json_values, st.data())
def test_any_change_of_a_value_changes_the_digest(value: Any, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(leaf_paths(value)))
    old = value
    for part in path:
        old = old[part]
    new = data.draw(leaves)
    # 1 and 1.0, or 0.0 and -0.0, are one JSON number: not a change.
    assume(canonical_bytes(new) != canonical_bytes(old))
    assert freeze_payload(replaced(value, path, new)).digest != freeze_payload(value).digest


def test_key_order_and_whitespace_never_reach_the_canonical_bytes() -> None:
    assert freeze_payload(json.loads('{ "b" : 1,\n "a": [ 1.0, "x" ] }')).canonical == (
        b'{"a":[1,"x"],"b":1}'
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"x": math.nan}, "NaN"),
        ({"x": math.inf}, "NaN and Infinity"),
        ({"x": 2**53}, "exactly representable"),
        ({"x": -(2**60)}, "exactly representable"),
        ({1: "x"}, "not a string"),
        ({"x": b"bytes"}, "bytes is not a JSON value"),
        ({"x": {1, 2}}, "set is not a JSON value"),
        ({"x": "\ud800"}, "unpaired surrogates"),
    ],
)
def test_non_json_values_are_rejected_with_a_typed_error(value: Any, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        freeze_payload(value)


def test_nesting_deeper_than_the_bound_is_rejected() -> None:
    deep: Any = "leaf"
    for _ in range(10):
        deep = [deep]
    freeze_payload(deep, max_depth=10)
    with pytest.raises(PayloadError, match="deeper than 9"):
        freeze_payload(deep, max_depth=9)


def test_a_payload_larger_than_the_bound_is_rejected() -> None:
    with pytest.raises(PayloadError, match="larger than 1024 bytes"):
        freeze_payload({"x": "y" * 1024}, max_bytes=1024)


def test_the_default_bound_is_one_mebibyte() -> None:
    freeze_payload({"x": "y" * (1024 * 1024 - 16)})
    with pytest.raises(PayloadError, match="larger than 1048576"):
        freeze_payload({"x": "y" * (1024 * 1024)})


def test_mutating_the_callers_object_or_the_decoded_copy_changes_nothing() -> None:
    original = {"items": [1, 2]}
    frozen = freeze_payload(original)
    original["items"].append(3)
    frozen.value["items"].append(4)
    assert frozen.value == {"items": [1, 2]}


def test_a_digest_that_does_not_match_its_bytes_is_rejected() -> None:
    with pytest.raises(PayloadError, match="digest"):
        FrozenEffectPayload(canonical=b"{}", digest="0" * 64)


def test_stored_canonical_bytes_round_trip_and_non_canonical_bytes_are_refused() -> None:
    frozen = freeze_payload({"b": 1, "a": 2})
    assert FrozenEffectPayload.from_canonical(frozen.canonical) == frozen
    with pytest.raises(PayloadError, match="canonical form"):
        FrozenEffectPayload.from_canonical(b'{"b":1,"a":2}')


@pytest.mark.parametrize("payload", [{"text": "a\x00b"}, {"k\x00": 1}, {"deep": [{"x": "\x00"}]}])
def test_a_nul_character_is_refused_because_postgresql_cannot_store_it(payload: object) -> None:
    with pytest.raises(PayloadError, match="U\\+0000"):
        freeze_payload(payload)


@pytest.mark.parametrize("payload", [{"text": "\ud800"}, {"\udfff": 1}])
def test_an_unpaired_surrogate_is_refused_as_not_unicode(payload: object) -> None:
    with pytest.raises(PayloadError, match="surrogates"):
        freeze_payload(payload)

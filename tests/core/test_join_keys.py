"""``join_keys`` joins two plain tuples with one ``+`` (the default policy's queue key, once per examined job):
the same key as the straightforward concatenation, part by part, for every mix of parts."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.pipeline import join_keys

Pair = namedtuple("Pair", "a b")
ATOM = st.one_of(st.integers(-5, 5), st.floats(0, 1), st.text(max_size=2))
PART = st.one_of(ATOM, st.lists(ATOM, max_size=3).map(tuple), st.tuples(ATOM, ATOM).map(lambda t: Pair(*t)),
                 st.lists(ATOM, max_size=2))


def straight(parts: list[Any]) -> tuple[Any, ...]:
    key: list[Any] = []
    for part in parts:
        key.extend(part) if isinstance(part, tuple) else key.append(part)
    return tuple(key)


@given(st.lists(PART, max_size=4))
def test_join_keys_equals_part_by_part(parts: list[Any]) -> None:
    joined = join_keys(parts)
    assert type(joined) is tuple and joined == straight(parts)


def test_two_tuples_keep_their_order() -> None:
    assert join_keys([(-10,), ((0.25,),)]) == (-10, (0.25,))

"""``FitIndex.holding`` keeps, per (request, count), the clusters of a list that hold ``count`` pods, and builds it
again only when a cluster changed since went in or out: compared with the straightforward filter over the list
after random shrinks, growths and removals, for several counts and for lists kept and replaced."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.fitindex import FitIndex

NAMES = ("a", "b", "c", "d", "e")
CHANGE = st.one_of(
    st.tuples(st.just("shrink"), st.sampled_from(NAMES), st.integers(0, 6)),
    st.tuples(st.just("shrink"), st.sampled_from(NAMES), st.integers(0, 6)),     # bookings: the common case
    st.tuples(st.just("grow"), st.sampled_from(NAMES), st.integers(0, 6)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("ask"), st.sampled_from(NAMES), st.integers(1, 5)),
    st.tuples(st.just("relist"), st.sampled_from(NAMES), st.just(0)),
)


@dataclass(frozen=True)
class Named:
    name: str


@settings(max_examples=300, deadline=None)
@given(start=st.lists(st.integers(0, 6), min_size=len(NAMES), max_size=len(NAMES)),
       changes=st.lists(st.lists(CHANGE, max_size=4), max_size=12))
def test_holding_equals_a_fresh_filter(start: list[int], changes: list) -> None:
    have = dict(zip(NAMES, start))
    index = FitIndex()
    request = (("cpu", 1),)
    listed = [Named(name) for name in NAMES]         # kept between asks, like ready_clusters()

    def ask(count: int) -> None:
        got, _ = index.counts(request, list(have), have.__getitem__, have.__contains__, lambda n: True)
        assert index.holding(request, count, listed, got) == [c for c in listed if have.get(c.name, 0) >= count]

    for count in (1, 3):
        ask(count)
    for batch in changes:
        for kind, name, amount in batch:
            if kind == "shrink" and name in have:
                have[name] = min(have[name], amount)
                index.changed(name, shrunk=True)
            elif kind == "grow":
                have[name] = max(have.get(name, 0), amount)
                index.changed(name)
            elif kind == "remove" and name in have and len(have) > 1:
                del have[name]
                index.changed(name)
            elif kind == "ask":
                ask(amount)
            elif kind == "relist":          # a new list (readiness changed): the kept one is not reused
                listed = [c for c in listed if c.name != name] + [Named(name)]
        for count in (1, 3):
            ask(count)

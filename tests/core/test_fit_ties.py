"""``FitIndex.counts`` keeps the most replicas on a ready cluster with its ties (how many ready clusters hold
exactly that) while changes only shrink clusters, and takes it again over every cluster only when the last
one holding it lost some. Compared with the straightforward max (and count of ties) over every ready cluster
after random shrinks, growths, readiness changes and removals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.fitindex import FitIndex

NAMES = ("a", "b", "c", "d", "e")
CHANGE = st.one_of(
    st.tuples(st.just("shrink"), st.sampled_from(NAMES), st.integers(0, 4)),
    st.tuples(st.just("shrink"), st.sampled_from(NAMES), st.integers(0, 4)),     # bookings: the common case
    st.tuples(st.just("grow"), st.sampled_from(NAMES), st.integers(0, 4)),
    st.tuples(st.just("ready"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("ask"), st.sampled_from(NAMES), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(start=st.lists(st.integers(0, 6), min_size=len(NAMES), max_size=len(NAMES)),
       ready=st.lists(st.booleans(), min_size=len(NAMES), max_size=len(NAMES)),
       changes=st.lists(st.lists(CHANGE, max_size=4), max_size=12))
def test_most_and_ties_equal_a_fresh_count(start: list[int], ready: list[bool], changes: list) -> None:
    have = dict(zip(NAMES, start))
    up = dict(zip(NAMES, ready))
    index = FitIndex()
    request = (("cpu", 1),)
    calls: list[str] = []

    def count(name: str) -> int:
        calls.append(name)
        return have[name]

    def ask() -> None:
        got, most = index.counts(request, list(have), count, have.__contains__, lambda n: up[n])
        assert got == have
        ready_counts = [n for name, n in have.items() if up[name]]
        assert most == max(ready_counts, default=0)
        entry = index._counts[request]
        assert entry[2] == most
        if most:
            assert entry[3] == ready_counts.count(most)      # the ties the shortcut relies on

    ask()
    for batch in changes:
        for kind, name, amount in batch:
            if kind == "shrink" and name in have:
                have[name] = min(have[name], amount)
                index.changed(name, shrunk=True)
            elif kind == "grow":
                have[name] = max(have.get(name, 0), amount)
                up.setdefault(name, True)
                index.changed(name)
            elif kind == "ready" and name in have:
                up[name] = amount
                index.changed(name)
            elif kind == "remove" and name in have and len(have) > 1:
                del have[name]
                index.changed(name)
        ask()


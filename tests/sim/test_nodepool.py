"""NodePool's first fit (which skips nodes known not to fit) always equals a plain scan of every node."""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.resources import Resources, fits
from engine.sim.members import NodePool

REQUESTS: list[Resources] = [{"cpu": 1}, {"cpu": 2, "memory": 1}, {"cpu": 4}, {"memory": 3}, {"cpu": 3, "memory": 2}]


def scan(free: list[Resources], request: Resources) -> Optional[int]:
    return next((i for i, node in enumerate(free) if fits(request, node)), None)


@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(1, 8), data=st.data())
def test_first_fit_equals_a_full_scan(nodes: int, data: Any) -> None:
    pool = NodePool([{"cpu": 4, "memory": 4} for _ in range(nodes)])
    placed: list[tuple[int, Resources]] = []
    for _ in range(60):
        if placed and data.draw(st.integers(0, 2)) == 0:
            node, request = placed.pop(data.draw(st.integers(0, len(placed) - 1)))
            pool.give(node, request)
            continue
        request = data.draw(st.sampled_from(REQUESTS))
        expected = scan(pool.free, request)
        assert pool.first_fit(request) == expected
        if expected is not None:
            pool.take(expected, request)
            placed.append((expected, request))

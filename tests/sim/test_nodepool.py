"""NodePool's first fit (which skips nodes known not to fit) always equals a plain scan of every node, and the
grade counts a member keeps per node always equal a count over every node."""

from __future__ import annotations

import random
from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import count_grades
from engine.resources import Resources, fits
from engine.sim.members import Member, NodePool

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


@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(1, 6), data=st.data())
def test_grade_counts_kept_per_node_equal_a_full_count(nodes: int, data: Any) -> None:
    """Member.allocatable_modelings updates only the nodes NodePool touched since the last report: after any
    run of binds and releases, each report equals Karmada's count over every node (pod-full nodes left out)."""
    grades = [{"cpu": 0, "memory": 0}, {"cpu": 1, "memory": 1}, {"cpu": 2, "memory": 2}, {"cpu": 4, "memory": 3}]
    capacity = [{"cpu": 4, "memory": 4, "pods": 3} for _ in range(nodes)]
    member = Member("m", {}, capacity, "volcano", random.Random(0), grades=grades)
    placed: list[tuple[int, Resources]] = []
    for _ in range(40):
        if placed and data.draw(st.integers(0, 2)) == 0:
            node, request = placed.pop(data.draw(st.integers(0, len(placed) - 1)))
            member.nodes.give(node, request)
        else:
            request = {**data.draw(st.sampled_from(REQUESTS)), "pods": 1}
            fit = member.nodes.first_fit(request)
            if fit is not None:
                member.nodes.take(fit, request)
                placed.append((fit, request))
        if data.draw(st.booleans()):
            frees = [f for f in member.free if f.get("pods", 0) > 0]
            assert member.allocatable_modelings() == count_grades(grades, frees)

"""``Job.shape`` interns equal shapes: the value is the straightforward tuple of the job's tasks, equal jobs
share one object, and a full table (cleared) changes no value."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import model
from engine.model import Job, Task
from engine.resources import CPU, GPU, MEMORY

TASK = st.tuples(st.sampled_from(("a", "b")), st.integers(0, 4), st.integers(0, 4),
                 st.dictionaries(st.sampled_from((CPU, MEMORY, GPU)), st.integers(0, 8)))


def job(n: int, tasks: list) -> Job:
    return Job(id=f"j{n}", name=f"j{n}", tasks=[Task(name, replicas, low, dict(res)) for name, replicas, low, res in tasks])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(TASK, max_size=3), min_size=1, max_size=6), st.booleans())
def test_shape_is_the_tasks_tuple_and_equal_shapes_are_one_object(specs: list, clear: bool) -> None:
    seen: dict[tuple, tuple] = {}
    for n, tasks in enumerate(specs):
        if clear:
            model._SHAPES.clear()
        j = job(n, tasks)
        straight = tuple((t.name, t.replicas, t.min_available, tuple(t.resources.items())) for t in j.tasks)
        assert j.shape == straight and hash(j.shape) == hash(straight)
        again = job(n + 100, tasks).shape
        assert again == straight
        if not clear:
            assert again is j.shape
            assert seen.setdefault(straight, j.shape) is j.shape


def straight_sum(tasks: list[Task], count: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for t in tasks:
        for name, amount in t.resources.items():
            if amount * getattr(t, count):
                total[name] = total.get(name, 0) + amount * getattr(t, count)
    return total


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(TASK, max_size=3), min_size=1, max_size=6), st.booleans())
def test_derived_values_are_the_tasks_and_shared_per_shape(specs: list, clear: bool) -> None:
    """``demand``, ``min_demand``, ``pods``, ``min_pods`` are what the tasks say, whatever was computed before
    (and after the tables are cleared); jobs of one shape share one object for each."""
    first: dict[tuple, Job] = {}
    for n, tasks in enumerate(specs):
        if clear:
            model._SHAPES.clear()
            for values in model._BY_SHAPE.values():
                values.clear()
        j = job(n, tasks)
        assert j.demand == straight_sum(j.tasks, "replicas")
        assert j.min_demand == straight_sum(j.tasks, "min_available")
        assert j.pods == model.pods_of((t.resources, t.replicas) for t in j.tasks)
        assert j.min_pods == model.pods_of((t.resources, t.min_available) for t in j.tasks)
        other = first.setdefault(j.shape, j)
        if not clear and other is not j:
            for name in ("demand", "min_demand", "pods", "min_pods"):
                assert getattr(j, name) is getattr(other, name)


def test_a_job_keeps_its_own_fields_only() -> None:
    """Slots: a job takes no attribute of a plugin's (CONTRIBUTING.md), and a changed copy derives its own values."""
    import dataclasses

    import pytest
    j = job(1, [("a", 2, 1, {CPU: 1000})])
    with pytest.raises(AttributeError):
        j.mine = 1          # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        j.nothing           # type: ignore[attr-defined]  # noqa: B018
    assert j.demand == {CPU: 2000}
    bigger = dataclasses.replace(j, tasks=[Task("a", 4, 1, {CPU: 1000})])
    assert bigger.demand == {CPU: 4000} and bigger.min_demand == {CPU: 1000} and j.demand == {CPU: 2000}


def test_derived_values_are_in_their_slots_when_the_job_is_built() -> None:
    """Derived when built, not on first read: a ``__getattr__`` (the lazy way) would leave every job field read
    unspecialised in CPython 3.11 (``LOAD_ATTR_SLOT`` needs the generic ``tp_getattro``)."""
    assert not hasattr(Job, "__getattr__") and Job.__getattribute__ is object.__getattribute__
    j = job(1, [("a", 3, 2, {CPU: 1000, GPU: 1})])
    for name in model._DERIVED:                  # read straight from the slots, as a specialised read does
        assert getattr(Job, name).__get__(j, Job) is not None
    assert getattr(Job, "min_pods").__get__(j, Job) == model.pods_of([({CPU: 1000, GPU: 1}, 2)])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(TASK, max_size=3), st.booleans()), min_size=1, max_size=8))
def test_shape_key_names_one_shape_for_good(specs: list) -> None:
    """``Job.shape_key``, per-shape caches' key: jobs of equal shapes built while the shape stays interned get one
    key, and a key never names another shape, not even after the interned shapes are dropped (``clear``: as
    ``_shape`` does when the table is full), when the numbering goes on."""
    named: dict[int, tuple] = {}
    for n, (tasks, clear) in enumerate(specs):
        if clear:
            model._SHAPES.clear()
            model._SHAPE_KEYS.clear()
        j = job(n, tasks)
        assert named.setdefault(j.shape_key, j.shape) == j.shape
        assert job(n + 100, tasks).shape_key == j.shape_key

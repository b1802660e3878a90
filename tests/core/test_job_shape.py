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

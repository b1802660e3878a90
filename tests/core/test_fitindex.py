"""FitIndex, kept incrementally by FleetState, always equals checking every cluster's free capacity again."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.fitindex import FitIndex
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Task
from engine.resources import CPU, GPU, MEMORY, fits

NAMES = ("a", "b", "c", "d")
need_st = st.dictionaries(st.sampled_from((CPU, MEMORY, GPU)), st.integers(0, 4)).map(
    lambda d: {k: v * 1000 if k == CPU else v for k, v in d.items()})
op_st = st.one_of(
    st.tuples(st.just("upsert"), st.sampled_from(NAMES), st.integers(0, 6), st.integers(0, 6), st.integers(0, 4),
              st.booleans()),
    st.tuples(st.just("remove"), st.sampled_from(NAMES)),
    st.tuples(st.just("hold"), st.sampled_from(NAMES), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("release"), st.integers(0, 20), st.booleans()),
    st.tuples(st.just("query"), need_st),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(op_st, max_size=40), st.booleans())
def test_clusters_fitting_equals_a_fresh_check_after_any_changes(ops: list[Any], tiny: bool) -> None:
    state = FleetState()
    if tiny:                                     # small limits: the index resets itself often
        state._fits = FitIndex(log_limit=3, request_limit=2)
    held: list[Job] = []
    now = 0.0
    for op in ops:
        now += 1
        kind = op[0]
        if kind == "upsert":
            _, name, cpu, used, gpu, ready = op
            state.upsert_cluster(Cluster(name, ready=ready, allocatable={CPU: cpu * 1000, MEMORY: 8, GPU: gpu},
                                         allocated={CPU: min(used, cpu) * 1000}, status_time=now))
        elif kind == "remove":
            state.remove_cluster(op[1])
        elif kind == "hold" and op[1] in state.clusters:
            _, name, cpu, gpu = op
            job = Job(id=f"j{len(held)}", name="j", tasks=[Task("t", 1, 1, {CPU: cpu * 1000, GPU: gpu})])
            job.state, job.placement = JobState.ADMITTED, {name: {"t": 1}}
            state.hold(job)
            held.append(job)
        elif kind == "release" and held:
            job = held.pop(op[1] % len(held))
            if op[2]:
                job.state = JobState.RUNNING
                state.mark_started(job, now)
            state.release(job, now if op[2] else None)
            job.state = JobState.SUCCEEDED
        # after every step: the op's own request, and a few fixed ones whose sets live across steps
        fixed: list[dict[str, int]] = [{CPU: 1000}, {CPU: 3000}, {GPU: 1}, {CPU: 2000, GPU: 2}, {}]
        for need in ([op[1]] if kind == "query" else []) + fixed:
            clusters = sorted(state.clusters.values(), key=lambda c: c.name)
            assert state.clusters_fitting(need, clusters) == [c for c in clusters if fits(need, state.free(c.name))]


def test_only_clusters_reported_since_are_checked_again() -> None:
    frees = {"a": {CPU: 4}, "b": {CPU: 1}}
    checked: list[str] = []

    def free_of(name: str) -> dict[str, int]:
        checked.append(name)
        return frees[name]

    index = FitIndex()
    request = ((CPU, 2),)
    assert index.fitting(request, frees, free_of, frees.__contains__) == {"a"}
    checked.clear()
    frees["b"] = {CPU: 3}
    index.changed("b")
    assert index.fitting(request, frees, free_of, frees.__contains__) == {"a", "b"}
    assert checked == ["b"]
    del frees["a"]
    index.changed("a")
    assert index.fitting(request, frees, free_of, frees.__contains__) == {"b"}

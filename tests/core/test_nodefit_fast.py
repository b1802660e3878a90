"""The memoised, incremental node-aware fit (replica counts per pod shape, FitIndex shrink skips) always
answers what the straightforward computation on the node view and free totals answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import fits, shapes_of
from engine.core.state import FleetState
from engine.model import Cluster, Job, Task
from engine.resources import CPU, GPU

GRADES = [{GPU: g, CPU: 4000 * g} for g in range(9)]
POD = st.tuples(st.integers(1, 8), st.sampled_from((1000, 2000, 4000, 8000)), st.integers(1, 4))  # gpus, cpu, count


def straight(state: FleetState, cluster: str, pods: tuple) -> bool:
    free = state.free(cluster)
    need: dict[str, int] = {}
    for per_pod, count in pods:
        for name, amount in per_pod:
            need[name] = need.get(name, 0) + amount * count
    if any(v > free.get(k, 0) for k, v in need.items()):
        return False
    shapes = state.nodes(cluster)
    return shapes is None or fits(shapes, pods)


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.lists(st.integers(0, 3), min_size=9, max_size=9), min_size=2, max_size=3),
       holds=st.lists(st.tuples(st.integers(0, 2), POD), max_size=8),
       asks=st.lists(st.lists(POD, min_size=1, max_size=2), min_size=1, max_size=6))
def test_fast_paths_equal_straight_computation(counts: list[list[int]], holds: list, asks: list) -> None:
    state = FleetState()
    names = [f"c{i}" for i in range(len(counts))]
    for name, count in zip(names, counts):
        state.upsert_cluster(Cluster(name, allocatable={GPU: 64, CPU: 256_000},
                                     node_shapes=shapes_of(GRADES, count)))
    for step, (where, (gpus, cpu, n)) in enumerate([(0, (1, 1000, 1)), *holds]):
        for pods_spec in asks:          # ask before and after each booking: the caches are exercised
            job_pods = Job(id="x", name="x", queue="q",
                           tasks=[Task(f"t{i}", c, c, {GPU: g, CPU: m}) for i, (g, m, c) in enumerate(pods_spec)]).min_pods
            want = {name: straight(state, name, job_pods) for name in names}
            assert {name: state.fits_tasks(name, job_pods) for name in names} == want
            ready = [state.clusters[n] for n in names]
            assert [c.name for c in state.clusters_fitting_pods({}, job_pods, ready)] == [n for n in names if want[n]]
            assert state.fits_somewhere({}, job_pods) == any(want.values())
            for per_pod, _ in job_pods:
                state._fit_memo.clear()
                direct = state.replicas_fit(names[0], per_pod)
                assert direct == state.replicas_fit(names[0], per_pod)
        target = names[where % len(names)]
        job = Job(id=f"j{step}", name=f"j{step}", queue="q", tasks=[Task("t", n, n, {GPU: gpus, CPU: cpu})])
        job.placement = {target: {"t": n}}
        state.jobs[job.id] = job
        state.hold(job)

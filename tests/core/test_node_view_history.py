"""A cluster's node view is a function of the state, not of the path that led to it: the view kept and updated
booking by booking (and the views kept after each in-flight job) equals the view defined by the report, the dry
run's supposed-gone jobs and the in-flight jobs in booking order. Caches keyed on ``FleetState.touched`` (kept
scores, rooms) rely on it: a dry run drops its touches because everything it changed is back as it was."""

from __future__ import annotations

from typing import Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import NodeShapes, pairs, reserve, shapes_of, vector
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Task
from engine.resources import CPU, GPU
from tests.plugins.test_node_fast_paths import ALLOCATABLE, GRADES, POD, hold

REPORT = st.one_of(st.lists(st.integers(0, 3), min_size=9, max_size=9), st.just(None))    # None: no models
HOLD = st.tuples(st.just("hold"), st.integers(0, 1), POD, st.integers(1, 4))
EVENT = st.one_of(HOLD, HOLD, HOLD,
                  st.tuples(st.just("rehold"), st.integers(0, 20), st.integers(0, 2)),
                  st.tuples(st.just("release"), st.integers(0, 20)),
                  st.tuples(st.just("again"), st.integers(0, 20), st.integers(1, 3)),
                  st.tuples(st.just("start"), st.integers(0, 20)),
                  st.tuples(st.just("report"), st.integers(0, 1), REPORT),
                  st.tuples(st.just("dry run"), st.lists(st.integers(0, 20), min_size=1, max_size=3),
                            st.integers(0, 4)))


def _cluster(name: str, counts: Optional[list[int]], at: float = 0.0) -> Cluster:
    return Cluster(name, allocatable=dict(ALLOCATABLE), node_shapes=shapes_of(GRADES, counts) if counts else None,
                   status_time=at)


def _reference(state: FleetState, cluster: str) -> Optional[NodeShapes]:
    """What the view must be, from the state alone (the definition, nothing kept): the report; for each job the
    report counts that a dry run supposes gone, a node of each pod's size given back; then each in-flight job not
    supposed gone booked, one job after the other in booking order."""
    shapes = state.clusters[cluster].node_shapes
    if shapes is None or shapes.karmada_defaults:
        return None
    flights = state.inflight(cluster)
    gone = state._gone.get(cluster, {})
    for job_id in gone:
        if job_id in state.jobs and job_id not in flights:
            pods = [(vector({k: v for k, v in pairs(per_pod) if k in shapes.resources}), count)
                    for per_pod, count in state.jobs[job_id].placed_pods(cluster)]
            shapes = NodeShapes.of([*shapes.nodes, *((vec, n) for vec, n in pods if vec)], shapes.resources)
    for job_id in flights:
        if job_id in state.jobs and job_id not in gone and state.jobs[job_id].placed_pods(cluster):
            shapes = reserve(shapes, state.jobs[job_id].placed_pods(cluster))
    return shapes


def _same(state: FleetState, names: list[str]) -> None:
    for name in names:
        assert state.nodes(name) == _reference(state, name), name


def _one_gpu_pods_on_two_nodes() -> tuple[FleetState, list[Job]]:
    state = FleetState()
    state.upsert_cluster(Cluster("a", allocatable={GPU: 16}, node_shapes=shapes_of([{GPU: g} for g in range(9)],
                                                                                   [0] * 8 + [2])))
    jobs = []
    for i in range(2):
        job = Job(id=f"j{i}", name=f"j{i}", queue="q", tasks=[Task("t", 1, 1, {GPU: 1})])
        job.placement, job.state = {"a": {"t": 1}}, JobState.ADMITTED
        state.jobs[job.id] = job
        state.nodes("a")                                        # the view is kept: the booking goes on it
        state.hold(job)
        jobs.append(job)
    return state, jobs


def test_a_dry_run_leaves_the_node_view_as_it_found_it() -> None:
    # two 8-GPU nodes, two 1-GPU pods booked one job at a time: each goes to the largest node (7, 7)
    state, jobs = _one_gpu_pods_on_two_nodes()
    before = state.nodes("a")
    assert state.replicas_fit("a", {GPU: 8}) == 0
    saved = state.dry_run_begin()
    state.suppose_gone(jobs[1], {"a": jobs[1].placed_demand("a")})
    state.suppose_gone(jobs[1], {"a": jobs[1].placed_demand("a")}, -1)
    state.dry_run_end(saved)
    # the dry run's touches are dropped, so the view must be the one before it (rebuilt with both pods booked
    # at once it was (6, 8): an 8-GPU pod fit)
    assert state.nodes("a") == before
    assert state.replicas_fit("a", {GPU: 8}) == 0


def test_a_release_rebuilds_the_view_the_bookings_would_give() -> None:
    state, jobs = _one_gpu_pods_on_two_nodes()
    third = Job(id="j2", name="j2", queue="q", tasks=[Task("t", 1, 1, {GPU: 1})])
    third.placement, third.state = {"a": {"t": 1}}, JobState.ADMITTED
    state.jobs[third.id] = third
    state.hold(third)
    state.release(jobs[0])
    _same(state, ["a"])
    assert state.nodes("a") == _one_gpu_pods_on_two_nodes()[0].nodes("a")   # j1 then j2 booked: (7, 7) again


@settings(max_examples=1000, deadline=None)
@given(reports=st.lists(REPORT, min_size=1, max_size=2),
       events=st.lists(st.tuples(EVENT, st.integers(0, 2)), min_size=4, max_size=24))
def test_the_kept_view_is_the_view_the_state_defines(reports: list, events: list) -> None:
    state = FleetState()
    names = [f"c{i}" for i in range(len(reports))]
    for name, counts in zip(names, reports):
        state.upsert_cluster(_cluster(name, counts))
    held: list[Job] = []
    n = 0
    for event, look in events:
        for name in names[:look]:
            state.nodes(name)                                   # keep these views: bookings go on them
        if event[0] == "hold":
            n += 1
            held.append(hold(state, names, event, n))
        elif event[0] == "rehold" and held:     # booked again, maybe elsewhere, as Lifecycle.update_job does
            job = held[event[1] % len(held)]
            state.release(job)
            job.placement = {names[event[2] % len(names)]: {"t": job.tasks[0].replicas}}
            state.hold(job)
        elif event[0] == "again" and held:      # in flight, booked again where it is with more pods (FleetState.hold)
            job = held[event[1] % len(held)]
            (where, _), = (job.placement or {}).items()
            if job.id in state.inflight(where):
                task = job.tasks[0]
                count = task.replicas + event[2]
                job.tasks, job.placement = [Task("t", count, count, task.resources)], {where: {"t": count}}
                state.hold(job)
        elif event[0] == "release" and held:
            state.release(held.pop(event[1] % len(held)))
        elif event[0] == "start" and held:     # its pods exist: the next report counts them, no longer in flight
            state.mark_started(held[event[1] % len(held)], float(n))
        elif event[0] == "report":
            _, where, counts = event
            n += 1
            state.upsert_cluster(_cluster(names[where % len(names)], counts, float(n)))
        elif event[0] == "dry run" and held:
            _, picks, asked = event
            victims = list({id(v): v for v in (held[i % len(held)] for i in picks)}.values())
            before = {name: state.nodes(name) for name in names}
            saved = state.dry_run_begin()
            for victim in victims:
                state.suppose_gone(victim, {c: victim.placed_demand(c) for c in victim.placement or {}})
                state.replicas_fit(names[asked % len(names)], ((CPU, 1000), (GPU, 1)))
                _same(state, names)
            for victim in reversed(victims):
                state.suppose_gone(victim, {c: victim.placed_demand(c) for c in victim.placement or {}}, -1)
            state.dry_run_end(saved)
            assert {name: state.nodes(name) for name in names} == before
        _same(state, names)

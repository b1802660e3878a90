"""``FitIndex.holds``: "do n pods of this shape fit on one ready cluster" answered without a recount when the
counts last said no and every change since only shrank a cluster. ``fits_somewhere`` is asked first after
every change (nothing else refreshes the counts in between), so the shortcut is taken whenever it can be,
and must answer what the straightforward check over every ready cluster answers: after bookings (shrinks),
releases and dry runs (growth), and reports (growth, readiness)."""

from __future__ import annotations

from typing import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.fitindex import FitIndex
from engine.core.nodefit import shapes_of
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Task
from engine.resources import CPU, GPU
from tests.core.test_nodefit_fast import straight

GRADES = [{GPU: g, CPU: 4000 * g} for g in range(9)]
ALLOCATABLE = {GPU: 64, CPU: 256_000}
POD = st.tuples(st.sampled_from((0, 1, 2, 4, 8)), st.sampled_from((1000, 4000, 8000)))     # gpus, cpu
REPORT = st.tuples(st.lists(st.integers(0, 3), min_size=9, max_size=9), st.booleans())     # node counts, ready
EVENT = st.one_of(
    st.tuples(st.just("hold"), st.integers(0, 3), POD, st.integers(1, 6)),
    st.tuples(st.just("hold"), st.integers(0, 3), POD, st.integers(1, 6)),       # bookings: the common case
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("report"), st.integers(0, 3), REPORT),
    st.tuples(st.just("gone"), st.integers(0, 20)),                              # a dry run's supposed victim
)


def cluster(name: str, counts: list[int], ready: bool) -> Cluster:
    return Cluster(name, allocatable=dict(ALLOCATABLE), ready=ready, node_shapes=shapes_of(GRADES, counts))


def job_of(name: str, gpus: int, cpu: int, count: int) -> Job:
    return Job(id=name, name=name, queue="q", tasks=[Task("t", count, count, {CPU: cpu, **({GPU: gpus} if gpus else {})})])


@settings(max_examples=200, deadline=None)
@given(reports=st.lists(REPORT, min_size=1, max_size=4), events=st.lists(EVENT, max_size=14),
       asks=st.lists(st.tuples(POD, st.integers(1, 12)), min_size=1, max_size=5), tiny=st.booleans())
def test_fits_somewhere_asked_first_equals_every_cluster_checked(reports: list, events: list, asks: list,
                                                                tiny: bool) -> None:
    state = FleetState()
    if tiny:                                     # small limits: the index resets itself often
        state._fits = FitIndex(log_limit=3, request_limit=2)
    names = [f"c{i}" for i in range(len(reports))]
    for name, (counts, ready) in zip(names, reports):
        state.upsert_cluster(cluster(name, counts, ready))
    play(state, names, events, lambda: check(state, asks))


def play(state: FleetState, names: list[str], events: list, check: Callable[[], None]) -> None:
    """Apply ``events`` (EVENT) to ``state``, whose clusters are ``names``: ``check`` after each, and inside each
    dry run too (in the supposed state)."""
    held: list[Job] = []
    for step, event in enumerate([None, *events]):
        if event is None:
            pass
        elif event[0] == "hold":
            _, where, (gpus, cpu), count = event
            job = job_of(f"held{step}", gpus, cpu, count)
            job.state, job.placement = JobState.ADMITTED, {names[where % len(names)]: {"t": count}}
            state.jobs[job.id] = job
            state.hold(job)
            held.append(job)
        elif event[0] == "release" and held:
            job = held.pop(event[1] % len(held))
            state.release(job)
            job.state = JobState.SUCCEEDED
        elif event[0] == "gone" and held:
            job = held[event[1] % len(held)]
            saved = state.dry_run_begin()
            state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}})
            check()                              # in the supposed state...
            state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}}, -1)
            state.dry_run_end(saved)
        elif event[0] == "report":
            _, where, (counts, ready) = event
            state.upsert_cluster(cluster(names[where % len(names)], counts, ready))
        check()                                  # ...and after every change


def check(state: FleetState, asks: list) -> None:
    ready = [c.name for c in state.ready_clusters()]
    for (gpus, cpu), count in asks:
        pods = job_of("ask", gpus, cpu, count).min_pods
        assert state.fits_somewhere({}, pods) == any(straight(state, name, pods) for name in ready)


def test_a_shape_held_nowhere_fits_again_once_a_booking_is_released() -> None:
    """Refused (counted), then a booking shrinks the cluster (answered without a recount), then the release
    grows it: the shortcut must not keep saying no."""
    state = FleetState()
    state.upsert_cluster(cluster("c0", [0] * 8 + [1], True))         # one node: 8 GPUs
    pods = job_of("ask", 8, 1000, 1).min_pods
    job = job_of("held", 1, 1000, 1)
    job.state, job.placement = JobState.ADMITTED, {"c0": {"t": 1}}
    state.jobs[job.id] = job
    state.hold(job)
    assert not state.fits_somewhere({}, pods)                            # 7 GPUs left on the node: counted
    other = job_of("held2", 1, 1000, 1)
    other.state, other.placement = JobState.ADMITTED, {"c0": {"t": 1}}
    state.jobs[other.id] = other
    state.hold(other)
    assert state._fits.holds(pods[0][0], 1) is False                    # a shrink since: known without a count
    assert not state.fits_somewhere({}, pods)
    state.release(other)
    state.release(job)
    assert state._fits.holds(pods[0][0], 1) is None                     # grown since: count again
    assert state.fits_somewhere({}, pods)

"""A dry run (``FleetState.dry_run_begin`` .. ``dry_run_end``) puts back the views it began with instead of
computing them again, and the next one reuses the credited views of the last while nothing changed in between:
inside and after each dry run, every view must be what computing it from scratch gives (free dicts key order
included: plugins iterate them), and the FitIndex must not keep what it saw inside a dry run."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.resources import CPU, GPU, Resources, add_into, clamp_nonnegative, sub

NAMES = ("a", "b", "c")
NEEDS = ({CPU: 1000}, {CPU: 4000}, {GPU: 1}, {CPU: 2000, GPU: 2}, {GPU: 4})


def _cluster(name: str, cpu_used: int, gpu_used: int, ready: bool = True, at: float = 0.0) -> Cluster:
    # gpu fully used in a report: gpu is then absent from its free, and only credits (or excess) bring it in
    return Cluster(name, allocatable={CPU: 8000, GPU: 4}, allocated={CPU: cpu_used, GPU: gpu_used}, ready=ready,
                   status_time=at)


def _job(i: int, cluster: str, cpu: int, gpu: int) -> Job:
    job = Job(f"ns/j{i}", f"j{i}", "ns", queue="q", tasks=[Task("t", 1, 1, {CPU: cpu, GPU: gpu})])
    job.placement = {cluster: {"t": 1}}
    job.state = JobState.ADMITTED
    return job


def _free(state: FleetState, name: str) -> Resources:
    c = state.clusters[name]
    return clamp_nonnegative(sub(sub(sub(c.allocatable, c.allocated), c.allocating), state._reserved.get(name, {})))


def _check(state: FleetState) -> None:
    """Every view equals its computation from scratch."""
    fleet: Resources = {}
    most: Resources = {}
    for name in NAMES:
        free = _free(state, name)
        assert list(state.free(name).items()) == list(free.items()), name       # key order too
        if state.clusters[name].ready:
            add_into(fleet, free)
            for r, v in free.items():
                most[r] = max(most.get(r, 0), v)
    assert state.fleet_free == fleet
    assert state.max_free == most
    ready = state.ready_clusters()
    for need in NEEDS:
        fit = [c.name for c in ready if all(_free(state, c.name).get(r, 0) >= v for r, v in need.items())]
        assert [c.name for c in state.clusters_fitting(need, ready)] == fit, need


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_dry_runs_leave_and_find_every_view_as_computing_it_gives(data: Any) -> None:
    state = FleetState()
    for name in NAMES:
        state.upsert_cluster(_cluster(name, 0, 0))
    state.upsert_queue(Queue("q"))
    held: list[Job] = []
    nominated: list[str] = []
    for i in range(data.draw(st.integers(1, 30))):
        op = data.draw(st.sampled_from(("hold", "release", "credit", "start", "report", "nominate", "unnominate",
                                        "dry", "dry", "dry")))
        cluster = data.draw(st.sampled_from(NAMES))
        if op == "hold":
            job = _job(i, cluster, data.draw(st.sampled_from((1000, 3000))), data.draw(st.integers(0, 2)))
            state.hold(job)
            held.append(job)
        elif op in ("release", "credit") and held:
            job = held.pop(data.draw(st.integers(0, len(held) - 1)))
            job.state = JobState.RUNNING
            # a credit: the report still counts the finished job's pods (reservations then go negative)
            state.release(job, ended_at=i + 0.5 if op == "credit" else None)
            job.state = JobState.SUCCEEDED
        elif op == "start" and held:
            state.mark_started(data.draw(st.sampled_from(held)), i)
        elif op == "report":            # ends the reservations of jobs started before it
            state.upsert_cluster(_cluster(cluster, data.draw(st.sampled_from((0, 4000, 8000))),
                                          data.draw(st.sampled_from((0, 4))), ready=data.draw(st.booleans()),
                                          at=i + 0.25))
        elif op == "nominate" and held:
            victim = data.draw(st.sampled_from(held))
            claim = data.draw(st.sampled_from(({}, {CPU: 1000}, {GPU: 1})))
            state.nominate(f"ns/p{i}", {c: dict(claim) for c in victim.placement or {}}, [victim])
            nominated.append(f"ns/p{i}")
        elif op == "unnominate" and nominated:
            state.unnominate(nominated.pop(data.draw(st.integers(0, len(nominated) - 1))))
        elif op == "dry":               # a preemption's dry run, read inside, victims given back
            saved = state.dry_run_begin()
            _check(state)
            gone = held[:data.draw(st.integers(0, len(held)))]
            for job in gone:
                state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}})
            _check(state)
            for job in gone:
                state.suppose_gone(job, {c: job.placed_demand(c) for c in job.placement or {}}, -1)
            state.dry_run_end(saved)
            assert state.capacity_epoch == saved
        _check(state)


def test_a_nomination_between_two_dry_runs_is_seen_by_the_second() -> None:
    """A nomination changes the excess but not ``changes``: the second dry run must not reuse the first's views."""
    state = FleetState()
    for name in NAMES:
        state.upsert_cluster(_cluster(name, 4000, 0))
    state.upsert_queue(Queue("q"))
    victim = _job(1, "a", 3000, 2)
    state.hold(victim)
    state.dry_run_end(state.dry_run_begin())
    assert state.free("a") == {CPU: 1000, GPU: 2}
    state.nominate("ns/p", {"a": {CPU: 1000}}, [victim])
    saved = state.dry_run_begin()
    assert state.free("a") == {CPU: 3000, GPU: 4}   # the victim's 2 cpu and 2 gpu beyond the claim count as free
    _check(state)
    state.dry_run_end(saved)
    state.dry_run_end(state.dry_run_begin())    # nothing changed since: reused
    _check(state)

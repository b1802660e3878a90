"""A room takes back what a counted candidate held once it leaves the index (engine.core.searchroom): that job's
capacity shows as free (a finish) or is nobody's to take (evicted by another preemptor), and counting it as freed
too made a room wake for nothing (churn-10k: 20,180 fresh searches ended on a room again; 6,910 since).
Whatever candidates come and go, a room that holds must say what a fresh search in the state of the moment says:
no dry run, no victim."""

from __future__ import annotations

from typing import Any, Optional
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import preempt as preempt_module
from engine.core import running as running_module
from engine.core.preempt import ANY, PreemptRule, RunningIndex, VictimSearch
from engine.core.searchroom import Room
from engine.core.searchwake import CandidateLog
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Queue, Task
from engine.resources import CPU, MEMORY

GI = 2**30
NAMES = ("a", "b", "c")
RULE = PreemptRule("priority", "priority-preemption", lambda queue: ANY)


def _job(i: int, cpu: int, cluster: Optional[str] = None) -> Job:
    job = Job(f"ns/j{i}", f"j{i}", "ns", queue="q", tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})])
    if cluster is not None:
        job.placement = {cluster: {"t": 1}}
        job.state = JobState.ADMITTED
        job.admitted_at = float(i)
    return job


class Fleet:
    """Three full 8-cpu clusters whose jobs are all candidates, and a pending job needing 6 cpu."""

    def __init__(self, one_cluster: bool) -> None:
        self.state = FleetState()
        self.index = RunningIndex()
        self.log = CandidateLog(self.index.candidate, lambda: self.index.version)
        self.index.log = self.log
        self.one_cluster = one_cluster
        self.preemptor = _job(0, 6000)
        self.state.upsert_queue(Queue("q"))
        for name in NAMES:
            self.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}))
        self.running: list[Job] = []
        self.made = 0

    def start(self, cluster: str, cpu: int) -> Job:
        self.made += 1
        job = _job(self.made, cpu, cluster)
        self.state.jobs[job.id] = job
        self.state.hold(job)
        self.index.add(job, 0, fresh=False)             # a candidate now (logged)
        self.running.append(job)
        return job

    def search(self) -> VictimSearch:
        """A fresh search in the state of now: its dry runs find no fit (only whether one is tried matters)."""
        search = VictimSearch(self.state, self.index, lambda job: None, lambda *_: None, 100.0, [1 << 30],
                              self.one_cluster)
        assert search.run(self.preemptor, [RULE]) is None
        return search

    def room(self) -> Optional[Room]:
        """The room a fresh search would park on, if it would (met candidates, no dry run)."""
        search = self.search()
        if search.tried or not search.rooms or search.volatile:
            return None
        return Room(self.preemptor.min_demand, search.rooms, self.state, self.index, self.log, self.log.end,
                    self.one_cluster)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_room_that_holds_says_what_a_fresh_search_says(data: Any) -> None:
    """Random finishes, evictions (leaving the index, still holding), new candidates, status reports and
    nominations (excess): whenever the room holds, a fresh search runs no dry run. ``FLEET_WIDE_MAX`` is 2 so
    that the fleet-wide try, and whether the excess counts, depend on how many candidates are left."""
    _random(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_room_that_holds_with_few_departures_kept_says_what_a_fresh_search_says(data: Any) -> None:
    """The same with ``RunningIndex.left`` keeping 2 departures: a room that did not look meanwhile wakes."""
    with patch.object(running_module, "_LEFT_KEPT", 2):
        _random(data)


def _random(data: Any) -> None:
    fleet = Fleet(one_cluster=data.draw(st.booleans()))
    for name in NAMES:                                  # each cluster full: its other pods use what its jobs do not
        cpus = data.draw(st.lists(st.sampled_from((1000, 2000, 3000)), min_size=1, max_size=3))
        for cpu in cpus:
            fleet.start(name, cpu)
        fleet.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                           allocated={CPU: 8000 - sum(cpus)}))
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 2):
        room = fleet.room()
        for i in range(data.draw(st.integers(1, 25))):
            op = data.draw(st.sampled_from(("finish", "finish", "evict", "start", "report", "nominate", "burst")))
            candidates = [job for job in fleet.running if fleet.index.candidate(job.id)]
            if op == "finish" and fleet.running:
                job = fleet.running.pop(data.draw(st.integers(0, len(fleet.running) - 1)))
                fleet.index.discard(job.id)
                fleet.state.release(job)
                job.state = JobState.SUCCEEDED
            elif op == "evict" and candidates:
                job = data.draw(st.sampled_from(candidates))
                fleet.index.discard(job.id)                  # evicting: still holds, nobody's candidate
            elif op == "burst":                          # several leave before the room looks again
                for job in data.draw(st.lists(st.sampled_from(candidates), unique=True)) if candidates else ():
                    fleet.index.discard(job.id)
                    fleet.state.release(job)
                    fleet.running.remove(job)
                    job.state = JobState.SUCCEEDED
            elif op == "start":
                fleet.start(data.draw(st.sampled_from(NAMES)), data.draw(st.sampled_from((1000, 2000))))
            elif op == "report":
                name = data.draw(st.sampled_from(NAMES))
                used = data.draw(st.sampled_from((0, 4000, 6000, 8000)))
                fleet.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                                   allocated={CPU: used}))
            elif op == "nominate" and candidates:
                victim = data.draw(st.sampled_from(candidates))
                fleet.state.nominate(f"ns/p{i}", {"b": {CPU: 1000}}, [victim])
            if room is not None and room.holds():
                search = fleet.search()
                assert search.dry_runs == 0, f"after {op}: the room holds, a fresh search tries a dry run"
            else:
                room = fleet.room()


def test_a_finished_candidate_is_not_counted_twice() -> None:
    """Two 2-cpu candidates on a full cluster a, the job needs 6: 0 free + 4 freed is short. One finishes: 2
    free + 2 freed, still short, and the room holds (before: 2 free + 4 freed covered 6, and it woke). Another
    2 cpu reported free: 4 + 2 covers 6 and it wakes, as a fresh search would try."""
    fleet = Fleet(one_cluster=True)
    first, _ = fleet.start("a", 2000), fleet.start("a", 2000)
    fleet.state.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 4000}))
    for name in ("b", "c"):
        fleet.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                           allocated={CPU: 8000}))
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 1):
        room = fleet.room()
        assert room is not None and room.holds()
        fleet.index.discard(first.id)
        fleet.state.release(first)
        assert room.holds() and fleet.search().dry_runs == 0
        fleet.state.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 2000}))
        assert fleet.state.free("a")[CPU] == 4000
        assert not room.holds() and fleet.search().dry_runs > 0


def test_a_cluster_left_without_candidates_is_not_looked_at() -> None:
    """The only candidate on a is evicted by another preemptor (it leaves the index; its 5 cpu are excess, coming
    free for nobody in particular): a fresh search meets no candidate there, so it never adds that excess, and the
    room drops the cluster, though free + excess there would cover the job. A new candidate on a brings it back:
    then a fresh search's fleet-wide try (at most ``FLEET_WIDE_MAX`` candidates, 2 here) counts the excess."""
    fleet = Fleet(one_cluster=True)
    victim, _, other = fleet.start("a", 5000), fleet.start("b", 2000), fleet.start("c", 2000)
    for name in NAMES:                                  # every cluster full
        fleet.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI},
                                           allocated={CPU: 3000 if name == "a" else 6000}))
    with patch.object(preempt_module, "FLEET_WIDE_MAX", 2):
        room = fleet.room()                             # 3 chosen: no fleet-wide try, the excess does not count
        assert room is not None and room.holds()
        fleet.index.discard(victim.id)
        fleet.state.nominate("ns/p", {}, [victim])      # a: 5 cpu coming free
        assert fleet.state.excess("a")[CPU] == 5000
        assert room.holds() and fleet.search().dry_runs == 0
        assert "a" not in room.rules[0].freed
        fleet.state.upsert_cluster(Cluster("a", allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 2000}))
        assert fleet.state.free("a")[CPU] == 1000       # 1 free + 5 coming: 6, but no candidate there
        assert room.holds() and fleet.search().dry_runs == 0
        fleet.running.remove(other)
        fleet.index.discard(other.id)
        fleet.state.release(other)                      # c: 2 free, short of 6
        assert room.holds() and fleet.search().dry_runs == 0
        fleet.start("a", 1000)                          # a: 0 free + 5 coming + 1 freed covers 6
        assert not room.holds() and fleet.search().dry_runs > 0


def test_a_room_that_missed_departures_no_longer_kept_wakes() -> None:
    """``RunningIndex.left`` keeping one departure: two candidates leave before the room looks again, and the
    first is forgotten. The room cannot tell what it held or whether it counted it: it wakes (and stays awake),
    as a watch that missed log entries does."""
    fleet = Fleet(one_cluster=True)
    jobs = [fleet.start(name, 2000) for name in NAMES]
    for name in NAMES:
        fleet.state.upsert_cluster(Cluster(name, allocatable={CPU: 8000, MEMORY: 64 * GI}, allocated={CPU: 6000}))
    with patch.object(running_module, "_LEFT_KEPT", 1):
        room = fleet.room()
        assert room is not None and room.holds()
        fleet.index.discard(jobs[0].id)
        assert room.holds()                                  # one departure, kept: taken back
        for job in jobs[1:]:
            fleet.index.discard(job.id)
        assert fleet.index.left_base == 2 and not room.holds() and not room.holds()

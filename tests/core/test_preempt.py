"""Preemption rules (engine.core.preempt + the priority-preemption plugin), one test per rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from engine.core.scheduler import Engine
from engine.model import Job, JobState, Preemption, Task
from engine.pipeline import Pipeline
from engine.resources import parse_resources
from plugins.capacity import Capacity
from plugins.fifo import Fifo
from plugins.gang import Gang
from plugins.job_priority import JobPriority
from plugins.priority_preemption import PriorityPreemption
from plugins.queue_priority import QueuePriority
from tests.plugins.queue_helpers import cluster, queue, res

Config = dict[str, Any]
ROOT_POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"


def make(preempt: Optional[Config] = None, capacity: Optional[Config] = None, extra: Sequence[Any] = ()) -> Engine:
    jp, gang = JobPriority({}, None), Gang({}, None)
    stages: dict[str, list[Any]] = {
        "enqueue": [jp], "order": [QueuePriority({}, None), jp, Fifo({}, None)],
        "admit": [Capacity(capacity or {}, None), gang], "place": [gang]}
    if preempt is not None:
        stages["preempt"] = [PriorityPreemption(preempt, None), *extra]
    return Engine(Pipeline(stages))


def job(name: str, cpu: int, priority: int = 0, q: str = "q", replicas: int = 1,
        labels: Optional[dict[str, str]] = None) -> Job:
    return Job(id=name, name=name, queue=q, priority=priority, labels=labels or {},
               tasks=[Task("w", replicas, replicas, parse_resources({"cpu": str(cpu)}))])


def run(engine: Engine, j: Job, where: dict[str, int], at: float = 0.0) -> None:
    """An admitted, running job (e.g. from before a restart): ``where`` = cluster -> replicas."""
    engine.adopt(j, {c: {"w": n} for c, n in where.items()}, at, running=True)


def fleet(engine: Engine, **clusters: int) -> None:
    for name, cpu in clusters.items():
        engine.upsert_cluster(cluster(name, cpu=str(cpu)))
    engine.upsert_queue(queue("q"))


def report(engine: Engine, name: str, now: float) -> None:
    """The member's next status report: it counts exactly the jobs holding capacity there."""
    c = engine.state.clusters[name]
    used: dict[str, int] = {}
    for j in engine.state.jobs.values():
        if j.state.holds_resources and j.placement and name in j.placement:
            for k, v in j.placed_demand(name).items():
                used[k] = used.get(k, 0) + v
    fresh = cluster(name, cpu=str(c.allocatable["cpu"] // 1000))
    fresh.allocated, fresh.status_time = used, now
    engine.upsert_cluster(fresh)


def preemptions(engine: Engine, now: float) -> list[Preemption]:
    return engine.cycle(now).preemptions


def test_a_higher_priority_job_evicts_a_lower_one_and_starts_once_it_is_gone() -> None:
    engine = make({})
    fleet(engine, m1=4)
    run(engine, job("low", 4), {"m1": 1})
    report(engine, "m1", 1.0)
    engine.submit(job("high", 4, priority=1000))
    result = engine.cycle(10.0)
    assert result.preemptions == [Preemption("high", ("low",), "priority", 10.0, 30.0, "priority-preemption")]
    assert result.admitted == []
    assert engine.state.jobs["low"].state is JobState.EVICTING
    assert "preempting 1 job(s) for it (priority): low" in engine.state.jobs["high"].pending_reason
    engine.evicted("low", 40.0)
    low = engine.state.jobs["low"]
    assert (low.state, low.preemptions, low.preempted_by) == (JobState.PENDING, 1, "high")
    assert "preempted by high" in low.pending_reason and "preempted 1 time(s); last by high at t=10" in engine.explain("low")
    assert engine.cycle(40.5).admitted == []             # the member still reports the victim's pods
    report(engine, "m1", 41.0)
    assert [a.job_id for a in engine.cycle(41.0).admitted] == ["high"]
    engine.finished("high", ended_at=100.0)
    assert [a.job_id for a in engine.cycle(100.0).admitted] == ["low"]       # requeued, runs again


def test_nothing_is_evicted_when_the_preemptor_still_would_not_fit() -> None:
    engine = make({})
    fleet(engine, m1=4, m2=4)
    run(engine, job("a", 4), {"m1": 1})
    run(engine, job("b", 4), {"m2": 1})
    engine.submit(job("gang8", 8, priority=1000))       # 8 cpu in one cluster: no member is that large
    engine.submit(job("q-capped", 2, priority=1000, q="small"))
    engine.upsert_queue(queue("small", capability=res(cpu="1")))      # a quota refusal never preempts
    result = engine.cycle(10.0)
    assert result.preemptions == [] and result.admitted == []
    assert all(engine.state.jobs[j].state is JobState.RUNNING for j in ("a", "b"))


def test_the_victim_set_is_minimal() -> None:
    engine = make({})
    fleet(engine, m1=10)
    run(engine, job("v-small", 2, priority=0), {"m1": 1})      # first in victim order, but not needed
    run(engine, job("v-big", 4, priority=1), {"m1": 1})
    run(engine, job("keep", 4, priority=9), {"m1": 1})
    engine.submit(job("p", 4, priority=5))
    [p] = preemptions(engine, 10.0)
    assert p.victims == ("v-big",)                 # v-small was taken first, then given back (fill-back)


def test_a_victim_is_evicted_whole_on_every_cluster_it_spans() -> None:
    engine = make({})
    fleet(engine, m1=4, m2=4)
    run(engine, job("span", 2, replicas=4), {"m1": 2, "m2": 2})      # 4 cpu on each member
    engine.submit(job("p", 4, priority=10))
    [p] = preemptions(engine, 10.0)
    assert p.victims == ("span",)
    engine.evicted("span", 20.0, ended_at=20.0)
    assert engine.state.jobs["span"].state is JobState.PENDING and not engine.state.inflight("m2")
    assert [a.job_id for a in engine.cycle(20.0).admitted] == ["p"]


def test_victims_lowest_priority_then_most_recent_then_stable() -> None:
    engine = make({})
    fleet(engine, m1=5)
    run(engine, job("old-low", 1, priority=0), {"m1": 1}, at=1.0)
    run(engine, job("new-low", 1, priority=0), {"m1": 1}, at=5.0)
    run(engine, job("mid", 1, priority=1), {"m1": 1}, at=9.0)
    run(engine, job("tie-a", 1, priority=2), {"m1": 1}, at=3.0)
    run(engine, job("tie-b", 1, priority=2), {"m1": 1}, at=3.0)
    engine.submit(job("p", 5, priority=10))
    [p] = preemptions(engine, 10.0)
    assert p.victims == ("new-low", "old-low", "mid", "tie-b", "tie-a")      # a tie: the later arrival first


def test_queues_above_their_guarantee_are_preferred_and_none_is_taken_below_it() -> None:
    engine = make({})
    engine.upsert_cluster(cluster("m1", cpu="6"))
    engine.upsert_queue(queue("q", priority=5))
    engine.upsert_queue(queue("within", guarantee=res(cpu="2")))       # uses 2 of its 2: protected
    engine.upsert_queue(queue("over", guarantee=res(cpu="1")))         # uses 4, 1 guaranteed
    run(engine, job("w", 2, q="within"), {"m1": 1})
    for i in range(4):
        run(engine, job(f"o{i}", 1, q="over", priority=5), {"m1": 1}, at=float(i))
    engine.submit(job("p", 3, priority=0))        # queue priority 5 beats the others' 0
    [p] = preemptions(engine, 10.0)
    assert p.victims == ("o3", "o2", "o1")         # not "w" (lower job priority) nor "o0" (the guarantee)
    engine.submit(job("p2", 2, priority=0))
    assert preemptions(engine, 11.0) == []         # only w and o0 are left: both guaranteed


def test_no_cycles_and_thrash_protections() -> None:
    engine = make({"maxPreemptions": 1, "minRuntime": "60s"})
    fleet(engine, m1=2)
    run(engine, job("young", 2, priority=0), {"m1": 1}, at=100.0)
    engine.submit(job("p", 2, priority=5))
    result = engine.cycle(120.0)
    assert result.preemptions == []                      # admitted 20 s ago: protected for 60 s
    assert engine.next_timer() == 160.0                  # looked at again when the protection ends
    assert [p.victims for p in preemptions(engine, 160.0)] == [("young",)]
    engine.evicted("young", 170.0, ended_at=170.0)
    assert [a.job_id for a in engine.cycle(170.0).admitted] == ["p"]
    young = engine.state.jobs["young"]
    assert young.preemptions == 1
    engine.finished("p", ended_at=200.0)
    engine.cycle(200.0)
    assert engine.state.jobs["young"].state is JobState.ADMITTED
    engine.submit(job("p2", 2, priority=5))
    assert preemptions(engine, 400.0) == []              # preempted once already: maxPreemptions 1


def test_a_victim_never_evicts_its_preemptor_back() -> None:
    engine = make({"acrossQueues": "queueThenJob"})
    fleet(engine, m1=2)
    run(engine, job("x", 2, priority=0), {"m1": 1})
    engine.submit(job("y", 2, priority=5))
    assert [p.victims for p in preemptions(engine, 10.0)] == [("x",)]
    engine.evicted("x", 11.0, ended_at=11.0)
    assert [a.job_id for a in engine.cycle(11.0).admitted] == ["y"]
    engine.update_job(job("x", 2, priority=50))          # edited: it now outranks y
    assert preemptions(engine, 200.0) == []              # ... but never evicts the job that evicted it
    engine.submit(job("z", 2, priority=50))              # control: anyone else of that priority does
    assert [p.victims for p in preemptions(engine, 201.0)] == [("y",)]


def test_freed_capacity_is_held_for_the_preemptor_and_two_preemptors_never_share_victims() -> None:
    engine = make({})
    fleet(engine, m1=4)
    run(engine, job("v1", 2), {"m1": 1})
    run(engine, job("v2", 2), {"m1": 1})
    engine.submit(job("p1", 2, priority=10))
    engine.submit(job("p2", 2, priority=10))
    result = engine.cycle(10.0)
    claimed = [p.victims for p in result.preemptions]
    assert sorted(claimed) == [("v1",), ("v2",)]        # one each, never the same victim
    engine.submit(job("sneaky", 2, priority=0))          # lower priority, arrives while victims go
    engine.evicted("v1", 20.0, ended_at=20.0)
    admitted = [a.job_id for a in engine.cycle(20.0).admitted]
    owner = next(p.preemptor for p in result.preemptions if p.victims == ("v1",))
    assert admitted == [owner]                           # the freed 2 cpu went to its preemptor only
    assert engine.state.jobs["sneaky"].state is JobState.PENDING


def test_the_nomination_times_out() -> None:
    engine = make({"nominationTimeout": "60s", "gracePeriod": "10s"})
    fleet(engine, m1=2)
    run(engine, job("v", 2), {"m1": 1})
    engine.submit(job("p", 2, priority=10))
    assert len(preemptions(engine, 10.0)) == 1
    assert engine.state.nominations()
    engine.cycle(70.0)                                   # the victim never went away
    assert not engine.state.nominations() and engine.state.jobs["p"].nominated is None


def test_jobs_admitted_in_the_same_cycle_are_never_victims() -> None:
    engine = make({})
    fleet(engine, m1=2)
    engine.submit(job("small-low", 2, priority=0, q="q"))
    engine.upsert_queue(queue("later"))
    result = engine.cycle(1.0)
    assert [a.job_id for a in result.admitted] == ["small-low"]
    engine.submit(job("high", 2, priority=9))
    assert [p.victims for p in preemptions(engine, 2.0)] == [("small-low",)]      # next cycle it may


def test_a_policy_without_a_preempt_stage_never_preempts() -> None:
    engine = make(None)
    fleet(engine, m1=2)
    run(engine, job("low", 2), {"m1": 1})
    engine.submit(job("high", 2, priority=1000))
    result = engine.cycle(10.0)
    assert result.preemptions == [] and engine.state.jobs["low"].state is JobState.RUNNING


def test_across_queues_modes() -> None:
    for mode, expect in (("none", []), ("queuePriority", []), ("queueThenJob", [("other",)])):
        engine = make({"acrossQueues": mode})
        fleet(engine, m1=2)
        engine.upsert_queue(queue("b"))
        run(engine, job("other", 2, q="b", priority=0), {"m1": 1})
        engine.submit(job("p", 2, priority=5))
        assert [p.victims for p in preemptions(engine, 10.0)] == expect, mode
    engine = make({"acrossQueues": "queuePriority"})
    fleet(engine, m1=2)
    engine.upsert_queue(queue("low-q", priority=-1))
    run(engine, job("v", 2, q="low-q", priority=99), {"m1": 1})
    engine.submit(job("p", 2, priority=0))
    assert [p.victims for p in preemptions(engine, 10.0)] == [("v",)]


def test_a_job_like_one_that_found_no_victim_this_cycle_does_not_search_again() -> None:
    from engine.core import preempt as core

    engine = make({})
    fleet(engine, m1=4)
    run(engine, job("same", 2, priority=5), {"m1": 1})
    run(engine, job("low", 2, priority=0), {"m1": 1})
    searches = []
    original = core.VictimSearch.run

    def counting(self: core.VictimSearch, job: Job, rules: list[core.PreemptRule]) -> Optional[core.Found]:
        searches.append(job.id)
        return original(self, job, rules)

    core.VictimSearch.run = counting          # type: ignore[method-assign]
    try:
        for i in range(3):
            engine.submit(job(f"peer{i}", 2, priority=5))       # equal priority: nobody to evict
        engine.submit(job("higher", 2, priority=6))
        result = engine.cycle(10.0)
    finally:
        core.VictimSearch.run = original      # type: ignore[method-assign]
    assert searches == ["higher", "peer0"]    # peer1 and peer2 share peer0's key: no search
    assert [p.victims for p in result.preemptions] == [("low",)]


def test_a_key_that_fitted_in_what_evictions_free_asks_that_first_next_time() -> None:
    """p1 evicts an 8-cpu victim for 4 cpu: 4 more are coming free on m1. p2, of p1's key, meets a candidate on
    m2 whose eviction would make room there, but its dry run finds it fits in what is coming: no victim of its own.
    At its next search, while that eviction is still under way, it asks that first and walks no candidate (one
    dry run charged, as before); once the victim is gone, its search walks and evicts as without the hint."""
    from engine.core import nomination
    from engine.core import preempt as core

    engine = make({})
    fleet(engine, m1=8, m2=4)
    run(engine, job("big-low", 8), {"m1": 1})
    run(engine, job("other-low", 4, priority=1), {"m2": 1})       # after big-low in victim order
    report(engine, "m1", 1.0)
    report(engine, "m2", 1.0)
    searches: list[tuple[str, int, int, tuple[str, ...]]] = []
    original = core.VictimSearch.run

    def counting(self: core.VictimSearch, job: Job, rules: list[core.PreemptRule]) -> Optional[core.Found]:
        found = original(self, job, rules)
        searches.append((job.id, self.visited, self.dry_runs, tuple(v.id for v in found.victims) if found else ()))
        return found

    core.VictimSearch.run = counting          # type: ignore[method-assign]
    try:
        engine.submit(job("p1", 4, priority=5))
        engine.submit(job("p2", 4, priority=5))
        first = engine.cycle(10.0)
        assert [p.victims for p in first.preemptions] == [("big-low",)]
        assert searches == [("p1", 1, 1, ("big-low",)), ("p2", 1, 1, ())]     # p2 fits in what is coming
        del searches[:]
        engine.upsert_cluster(cluster("m3", cpu="1"))     # a capacity change: p2 is looked at again
        second = engine.cycle(11.0)
        assert second.preemptions == [] and second.admitted == []
        assert searches == [("p2", 0, 1, ())]     # asked first: no candidate walked, one dry run charged
        assert engine._preempt._dry_runs[0] == nomination.DRY_RUNS_PER_CYCLE - 1
        del searches[:]
        engine.evicted("big-low", 12.0)           # gone, and p1's: nothing is coming free beyond p1's claim now
        third = engine.cycle(12.0)
    finally:
        core.VictimSearch.run = original      # type: ignore[method-assign]
    assert third.admitted == []               # the member still reports big-low's pods until its next report
    assert [p.victims for p in third.preemptions] == [("other-low",)]      # p2 walks and takes its own victim
    assert [s[0] for s in searches] == ["p2"] and searches[0][1] >= 1

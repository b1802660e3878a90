"""A preempt key found hopeless early in a cycle (``Preemptions._hopeless``) must not stay so when a change later in
the same cycle opens candidates to it: the next job of that key gets the search a fresh one would make.

Each case: queue v's jobs run on clusters x and y; queue r's jobs a1 and a2 (one preempt key) fit nowhere. In one
cycle a1 is examined and its search finds no eligible victim; r's big job amid next takes r's turn away
(progressive DRF); another queue's job is admitted (or preempts); then a2 is examined. That change opens a job of v
on x to a2, and freeing it lets a2 fit on x: both engines must issue that preemption in that cycle. Before the fix
the key stayed hopeless for the whole cycle (and the exhaustive engine shared that shortcut, so the exactness tests
could not see it): no preemption for a2, and none at the next cycles either (nothing re-examines a2 until capacity
moves)."""

from __future__ import annotations

import copy

from pathlib import Path
from typing import Any, NamedTuple, Optional

import pytest

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.policy import load_policy
from engine.resources import CPU, MEMORY
from tests.core.test_pruned_exact import GI, policy_file, policy_variant

NO_GUARANTEES = policy_variant("default-no-guarantees", "guarantees: true ", "guarantees: false ")
FAIR_SHARE = policy_file("default-fair-share", NO_GUARANTEES.read_text().replace("fairShare: false ", "fairShare: true "))
assert FAIR_SHARE.read_text() != NO_GUARANTEES.read_text()
_RECLAIM = "      minRuntime: 0s               # guarantees cannot cycle either (no queue is taken below its own)\n"
assert _RECLAIM + "      maxPreemptions: 3" in NO_GUARANTEES.read_text()
# reclaim looks at one candidate per search, and never takes a job preempted once already
RECLAIM_CUT = policy_file("default-reclaim-cut", NO_GUARANTEES.read_text().replace(
    _RECLAIM + "      maxPreemptions: 3", _RECLAIM + "      maxPreemptions: 1\n      maxCandidates: 1"))


def _job(name: str, queue: str, cpu: int, at: float, region: Optional[str] = None, protected: bool = False,
         priority: int = 0, preemptions: int = 0) -> Job:
    # cpu only: a queue using memory beyond a cpu-only guarantee would count as above it from the start
    return Job(f"ns/{name}", name, "ns", queue=queue, submit_time=at, priority=priority, preemptions=preemptions,
               tasks=[Task("t", 1, 1, {CPU: cpu})], labels={"atoll.dev/region": region} if region else {},
               annotations={"volcano.sh/preemptable": "false"} if protected else {})


class Case(NamedTuple):
    policy: Path
    x_cpu: int                          # cluster x's cpu (y has 2)
    queues: dict[str, dict[str, int]]   # name -> guarantee
    running: list[Job]                  # admitted in the first cycle
    a_cpu: int                          # a1's and a2's
    opener: Job                         # examined between a1 and a2 (after amid took r's turn away)
    opened: tuple                       # the event of ``opener`` (see ``_run``)
    preemptions: list[tuple[str, tuple[str, ...]]]


V2 = _job("v2", "v", 1000, 2.3, "y")
CASES: dict[str, Case] = {
    # v at its guarantee (2 cpu): reclaim opens no queue of it (b1 is protected); v2 takes v above its guarantee,
    # which opens v's older jobs to reclaim (Preemptions.index logs it: usage_changed)
    "above-guarantee": Case(NO_GUARANTEES, 3000, {"v": {CPU: 2000}, "r": {CPU: 3000}, "b": {}},
                            [_job("v1", "v", 1000, 0.1, "x"), _job("v1b", "v", 1000, 0.2, "x"),
                             _job("b1", "b", 1000, 0.3, "y", protected=True)], 2000, V2, ("v2", "admitted"),
                            [("ns/a2", ("ns/v1b",))]),
    # v above its guarantee (3 cpu of 2), but taking v1 (2 cpu) would take it below: passed over for the floor (a
    # volatile search); v2 raises v's usage to 4 cpu and v1 may go
    "guarantee-floor": Case(NO_GUARANTEES, 3000, {"v": {CPU: 2000}, "r": {CPU: 3000}},
                            [_job("v1", "v", 2000, 0.1, "x"), _job("v0", "v", 1000, 0.2, "y", protected=True)], 2000,
                            V2, ("v2", "admitted"), [("ns/a2", ("ns/v1",))]),
    # fair share (r has no guarantee): r's share with a job (2/5 cpu) above v's without v1 (1/5); v2 raises v's
    # usage and v's share without v1 to 2/5
    "fair-share": Case(FAIR_SHARE, 3000, {"v": {}, "r": {}},
                       [_job("v1", "v", 2000, 0.1, "x"), _job("v0", "v", 1000, 0.2, "y", protected=True)], 2000,
                       V2, ("v2", "admitted"), [("ns/a2", ("ns/v1",))]),
    # reclaim's search meets v1 first (the newest), which it may not take (preempted once), and stops there
    # (maxCandidates 1: volatile); a priority-10 job of queue p evicts v1 on y, and a2's search meets v0
    "candidates-cut": Case(RECLAIM_CUT, 2000, {"v": {}, "r": {CPU: 3000}, "p": {}},
                           [_job("v0", "v", 2000, 0.1, "x"), _job("v1", "v", 2000, 0.2, "y", preemptions=1)], 1500,
                           _job("p1", "p", 2000, 2.3, "y", priority=10), ("p1", "searched", True),
                           [("ns/p1", ("ns/v1",)), ("ns/a2", ("ns/v0",))]),
}


def _run(case: Case, exhaustive: bool) -> tuple[list[str], list[tuple[str, tuple[str, ...]]], list[tuple]]:
    engine = Engine(load_policy(case.policy).pipeline, exhaustive=exhaustive)
    engine.upsert_cluster(Cluster("x", labels={"region": "x"}, allocatable={CPU: case.x_cpu, MEMORY: 64 * GI}))
    engine.upsert_cluster(Cluster("y", labels={"region": "y"}, allocatable={CPU: 2000, MEMORY: 64 * GI}))
    for name, guarantee in case.queues.items():
        engine.upsert_queue(Queue(name, guarantee=guarantee))
    for job in case.running:
        engine.submit(copy.deepcopy(job))
    assert len(engine.cycle(1.0).admitted) == len(case.running)
    for job in (_job("a1", "r", case.a_cpu, 2.0), _job("amid", "r", 5000, 2.1), _job("a2", "r", case.a_cpu, 2.2),
                case.opener):
        engine.submit(copy.deepcopy(job))
    events: list[tuple] = []          # the order the cycle goes in: searches (and whether the key was known hopeless)
    preempt = engine._preempt
    attempt, index = preempt.attempt, preempt.index

    def attempted(job: Job, now: float, fit: Any) -> Any:
        known = preempt.hopeless(job)
        found = attempt(job, now, fit)
        events.append((job.name, "known hopeless" if known else "searched", found[0] is not None))
        return found

    def indexed(job: Job, fresh: bool) -> None:
        events.append((job.name, "admitted"))
        index(job, fresh)

    preempt.attempt, preempt.index = attempted, indexed      # type: ignore[method-assign]
    result = engine.cycle(2.0)
    return [a.job_id for a in result.admitted], [(p.preemptor, p.victims) for p in result.preemptions], events


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_change_that_opens_candidates_ends_a_hopeless_key(case: str) -> None:
    expected = CASES[case]
    for exhaustive in (False, True):
        admitted, preemptions, events = _run(expected, exhaustive)
        # a1's key found hopeless, then the change, then a2 (same key) examined: all in one cycle
        assert events[0] == ("a1", "searched", False), events
        assert expected.opened in events and events[-1][0] == "a2", events
        assert admitted == (["ns/v2"] if expected.opened[1] == "admitted" else [])
        assert preemptions == expected.preemptions, (exhaustive, events)
        assert events[-1] == ("a2", "searched", True)

"""A preempt key found hopeless early in a cycle (``Preemptions._hopeless``) must not stay so when an admission later
in the same cycle opens candidates to it: the next job of that key gets the search a fresh one would make.

Each case: cluster x (3 cpu) holds queue v's older jobs, cluster y (2 cpu) one more job; queue r's 2-cpu jobs fit
nowhere. In one cycle, a1 (queue r) is examined and its search finds no eligible victim; r's 5-cpu job next takes
r's turn away (progressive DRF), v2 (1 cpu, pinned to y) is admitted; then a2, a1's twin, is examined. v2's admission
opens v's job(s) on x to a2, and freeing one lets a2 fit on x. Both engines must issue that preemption in that cycle.
Before the fix the key stayed hopeless for the whole cycle (and the exhaustive engine shared that shortcut, so the
exactness tests could not see it): no preemption, and none at the next cycles either (nothing re-examines a2
until capacity moves)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.policy import load_policy
from engine.resources import CPU, MEMORY
from tests.core.test_pruned_exact import GI, policy_file, policy_variant

NO_GUARANTEES = policy_variant("default-no-guarantees", "guarantees: true ", "guarantees: false ")
FAIR_SHARE = policy_file("default-fair-share", NO_GUARANTEES.read_text().replace("fairShare: false ", "fairShare: true "))
assert FAIR_SHARE.read_text() != NO_GUARANTEES.read_text()


def _job(name: str, queue: str, cpu: int, at: float, region: Optional[str] = None, protected: bool = False) -> Job:
    # cpu only: a queue using memory beyond a cpu-only guarantee would count as above it from the start
    return Job(f"ns/{name}", name, "ns", queue=queue, submit_time=at, tasks=[Task("t", 1, 1, {CPU: cpu})],
               labels={"atoll.dev/region": region} if region else {},
               annotations={"volcano.sh/preemptable": "false"} if protected else {})


CASES: dict[str, tuple[Path, dict[str, dict[str, int]], list[Job], str]] = {
    # v at its guarantee (2 cpu): reclaim opens no queue of it (b1 is protected); v2 takes v above its guarantee,
    # which opens v's older jobs to reclaim (Preemptions.index logs it: usage_changed)
    "above-guarantee": (NO_GUARANTEES, {"v": {CPU: 2000}, "r": {CPU: 3000}, "b": {}},
                        [_job("v1", "v", 1000, 0.1, "x"), _job("v1b", "v", 1000, 0.2, "x"),
                         _job("b1", "b", 1000, 0.3, "y", protected=True)], "ns/v1b"),
    # v above its guarantee (3 cpu of 2), but taking v1 (2 cpu) would take it below: passed over for the floor (a
    # volatile search); v2 raises v's usage to 4 cpu and v1 may go
    "guarantee-floor": (NO_GUARANTEES, {"v": {CPU: 2000}, "r": {CPU: 3000}},
                        [_job("v1", "v", 2000, 0.1, "x"), _job("v0", "v", 1000, 0.2, "y", protected=True)], "ns/v1"),
    # fair share (r has no guarantee): r's share with a job (2/5 cpu) above v's without v1 (1/5); v2 raises v's
    # usage and v's share without v1 to 2/5
    "fair-share": (FAIR_SHARE, {"v": {}, "r": {}},
                   [_job("v1", "v", 2000, 0.1, "x"), _job("v0", "v", 1000, 0.2, "y", protected=True)], "ns/v1"),
}


def _run(case: str, exhaustive: bool) -> tuple[list[str], list[tuple[str, tuple[str, ...]]], list[Any]]:
    policy, queues, running, _ = CASES[case]
    engine = Engine(load_policy(policy).pipeline, exhaustive=exhaustive)
    engine.upsert_cluster(Cluster("x", labels={"region": "x"}, allocatable={CPU: 3000, MEMORY: 64 * GI}))
    engine.upsert_cluster(Cluster("y", labels={"region": "y"}, allocatable={CPU: 2000, MEMORY: 64 * GI}))
    for name, guarantee in queues.items():
        engine.upsert_queue(Queue(name, guarantee=guarantee))
    for job in running:
        engine.submit(job)
    assert len(engine.cycle(1.0).admitted) == len(running)
    for job in (_job("a1", "r", 2000, 2.0), _job("amid", "r", 5000, 2.1), _job("a2", "r", 2000, 2.2),
                _job("v2", "v", 1000, 2.3, "y")):
        engine.submit(job)
    events: list[Any] = []            # the order the cycle goes in: searches (and whether the key was known hopeless)
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
    decisions = ([a.job_id for a in result.admitted], [(p.preemptor, p.victims) for p in result.preemptions])
    return decisions[0], decisions[1], events


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_admission_that_opens_candidates_ends_a_hopeless_key(case: str) -> None:
    victim = CASES[case][3]
    for exhaustive in (False, True):
        admitted, preemptions, events = _run(case, exhaustive)
        # a1's key found hopeless, then v2 admitted, then a2 (same key) examined: all in one cycle
        assert events[0] == ("a1", "searched", False), events
        assert ("v2", "admitted") in events and events.index(("v2", "admitted")) < events.index(events[-1]), events
        assert events[-1][0] == "a2", events
        assert admitted == ["ns/v2"]
        assert preemptions == [("ns/a2", (victim,))], (exhaustive, events)
        assert events[-1] == ("a2", "searched", True)

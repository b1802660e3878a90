"""The settled rest of a cycle (engine.core.settle): once no job left can change the state, the candidate loop
stops keying queues and refuses the rest queue by queue. The decisions must stay the exhaustive engine's, and the
check must say no whenever a job left could still be admitted or preempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model import Cluster, Failure, FailureKind, Job, Queue, Task
from engine.resources import CPU, GPU, MEMORY
from tests.core.test_pruned_exact import GI, ROOT, Pair, _copy, clusters, play

DEFAULT = ROOT / "policies" / "default.yaml"


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The default policy, and no-preemption without guarantees (with them no queue's admit answer is shared)."""
    text = (ROOT / "policies" / "no-preemption.yaml").read_text()
    assert "guarantees: true" in text
    variant = tmp_path_factory.mktemp("policies") / "no-preemption-no-guarantees.yaml"
    variant.write_text(text.replace("guarantees: true", "guarantees: false"))
    return {"default": DEFAULT, "no-preemption": variant}


@st.composite
def alike_queues(draw: Any) -> list[Queue]:
    """Queues whose admit answers are shared (open, no capability, deserved share or guarantee), so that the
    check can say yes; some under a root."""
    out = [Queue("root", weight=1)] if draw(st.booleans()) else []
    for i in range(draw(st.integers(1, 4))):
        parent = "root" if out and draw(st.booleans()) else None
        out.append(Queue(f"q{i}", parent=parent, weight=draw(st.integers(1, 3)), priority=draw(st.sampled_from((0, 5)))))
    return out


@pytest.mark.parametrize("name", ["default", "no-preemption"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_settled_rests_decide_exactly_as_exhaustive(policies: dict[str, Path], name: str, data: Any) -> None:
    pair = Pair(policies[name], settle_after=data.draw(st.sampled_from((1, 2, 4)), label="settle_after"))
    fleet = data.draw(clusters())
    qs = data.draw(alike_queues())
    for c in fleet:
        pair.both("upsert_cluster", lambda c=c: (Cluster(c.name, labels=dict(c.labels), ready=c.ready,
                                                         allocatable=dict(c.allocatable)),))
    for q in qs:
        pair.both("upsert_queue", lambda q=q: (Queue(q.name, parent=q.parent, weight=q.weight, priority=q.priority),))
    play(pair, data, fleet, qs, [q.name for q in qs if q.name != "root"])


def _fill(pair: Pair, queues: int, jobs: int, same_shape: bool) -> None:
    """One 8-cpu cluster and ``jobs`` jobs over ``queues`` queues: a few fit, the rest never do in this state."""
    pair.both("upsert_cluster", lambda: (Cluster("m0", labels={"region": "eu"}, allocatable={CPU: 8000, MEMORY: 64 * GI}),))
    for q in range(queues):
        pair.both("upsert_queue", lambda q=q: (Queue(f"q{q}"),))
    for i in range(jobs):
        cpu = 3000 if same_shape else 3000 + 10 * i          # a key of its own per job, or one shared key
        job = Job(f"ns/j{i}", f"j{i}", "ns", queue=f"q{i % queues}", submit_time=float(i),
                  tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})])
        pair.both("submit", lambda job=job: (_copy(job),))


@pytest.mark.parametrize("name", ["default", "no-preemption"])
@pytest.mark.parametrize("same_shape", [False, True], ids=["keys-of-their-own", "one-key"])
def test_the_rest_of_a_filled_fleet_is_settled(policies: dict[str, Path], name: str, same_shape: bool) -> None:
    """Two jobs fit, the others are refused without another queue key; the same decisions as job by job. With a
    key of their own the jobs are drained one by one (~110 of 118); with one key, each queue is a walk that
    examines its group once and hands its refusal to the rest (the queues left at the check, then)."""
    pair = Pair(policies[name], settle_after=4)
    _fill(pair, queues=6, jobs=120, same_shape=same_shape)
    pair.cycle()
    assert len(pair.admitted()) == 2
    assert pair.settled >= (2 if same_shape else 100)


def test_a_job_that_fits_further_on_stops_the_check() -> None:
    """Queue "big" is served first and none of its jobs fits; the one job of queue "small" fits. Every check made
    while "big" is served must say no: the loop, not a drain, admits the small job, and nothing is settled."""
    pair = Pair(DEFAULT, settle_after=1)
    pair.both("upsert_cluster", lambda: (Cluster("m0", allocatable={CPU: 4000, MEMORY: 64 * GI}),))
    pair.both("upsert_queue", lambda: (Queue("big", priority=10),))
    pair.both("upsert_queue", lambda: (Queue("small"),))
    for i in range(10):
        pair.both("submit", lambda i=i: (Job(f"ns/b{i}", f"b{i}", "ns", queue="big", submit_time=float(i),
                                             tasks=[Task("t", 1, 1, {CPU: 5000 + i, MEMORY: GI})]),))
    pair.both("submit", lambda: (Job("ns/s", "s", "ns", queue="small", submit_time=20.0,
                                     tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    pair.cycle()
    assert pair.admitted() == ["ns/s"]
    assert pair.settled == 0


def test_a_job_that_may_preempt_stops_the_check() -> None:
    """Low-priority jobs fill the cluster; then queue "first" (served first) has jobs that fit nowhere and find no
    victim of a lower priority, and queue "second" a high-priority job that may evict one. No check may settle
    while that preemptor is left: the preemption is issued by the loop, as job by job."""
    pair = Pair(DEFAULT, settle_after=1)
    pair.both("upsert_cluster", lambda: (Cluster("m0", allocatable={CPU: 4000, MEMORY: 64 * GI, GPU: 0}),))
    pair.both("upsert_queue", lambda: (Queue("first", priority=10),))
    pair.both("upsert_queue", lambda: (Queue("second"),))
    for i in range(4):
        pair.both("submit", lambda i=i: (Job(f"ns/low{i}", f"low{i}", "ns", queue="second", submit_time=float(i),
                                             tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    pair.cycle()
    assert len(pair.admitted()) == 4
    for i in range(6):
        pair.both("submit", lambda i=i: (Job(f"ns/f{i}", f"f{i}", "ns", queue="first", submit_time=10.0 + i,
                                             tasks=[Task("t", 1, 1, {CPU: 5000 + i, MEMORY: GI})]),))
    pair.both("submit", lambda: (Job("ns/hi", "hi", "ns", queue="second", priority=100, submit_time=30.0,
                                     tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    before = pair.settled
    pair.cycle()
    assert pair.pruned.state.jobs["ns/hi"].nominated is not None       # it preempted
    assert pair.settled == before


def test_a_queue_with_limits_of_its_own_gets_its_own_refusal() -> None:
    """Queues with a capability (not alike) beside alike ones, every shape in each: a capped queue's job must be
    told its capability, never the answer an alike queue's job of its shape got from the shared admit answers."""
    pair = Pair(DEFAULT, settle_after=2)
    pair.both("upsert_cluster", lambda: (Cluster("m0", allocatable={CPU: 8000, MEMORY: 64 * GI}),))
    names = ["a0", "c0", "a1", "c1", "a2", "c2"]
    for name in names:
        capability = {CPU: 1000} if name.startswith("c") else None
        pair.both("upsert_queue", lambda name=name, capability=capability: (Queue(name, capability=capability),))
    for i in range(60):
        queue, cpu = names[i % 6], 3000 + 10 * (i // 6)      # each shape once in every queue
        pair.both("submit", lambda i=i, queue=queue, cpu=cpu: (
            Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, submit_time=float(i),
                tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})]),))
    pair.cycle()
    assert len(pair.admitted()) == 2
    assert "capability" in pair.pruned.state.jobs["ns/j59"].pending_reason       # (queue c2)


def test_a_job_backing_off_keeps_its_own_reason(policies: dict[str, Path]) -> None:
    """A failed job of queue "c" backs off. In the full cycle its freed capacity starts, queue "a" (served first)
    takes that capacity and refuses the rest, and the check looks at the failed job: it must say it backs off,
    not the shared answer for its shape. (Without preemption: with it, the running jobs would be candidate
    victims, and the refused jobs' searches are not known hopeless ahead.)"""
    pair = Pair(policies["no-preemption"], settle_after=2)
    pair.both("upsert_cluster", lambda: (Cluster("m0", allocatable={CPU: 8000, MEMORY: 64 * GI}),))
    for name, priority in (("a", 10), ("b", 0), ("c", 0)):
        pair.both("upsert_queue", lambda name=name, priority=priority: (Queue(name, priority=priority),))

    def job(name: str, queue: str, cpu: int, t: float) -> None:
        pair.both("submit", lambda: (Job(f"ns/{name}", name, "ns", queue=queue, submit_time=t,
                                         tasks=[Task("t", 1, 1, {CPU: cpu, MEMORY: GI})]),))
    job("bf", "b", 4000, 0.0)
    job("cf", "c", 4000, 1.0)
    pair.cycle()
    assert pair.admitted() == ["ns/bf", "ns/cf"]
    job("a0", "a", 4000, 2.0)
    for i in range(20):
        job(f"a{i + 1}", "a", 5000 + i, 3.0 + i)
    pair.cycle()
    pair.both("fail", lambda: ("ns/cf", Failure(FailureKind.JOB_FAILED, "m0", "boom"), pair.now))
    before = pair.settled
    pair.cycle()
    assert pair.admitted() == ["ns/a0", "ns/bf"]
    assert pair.pruned.state.jobs["ns/cf"].pending_reason.startswith("backing off")
    assert pair.settled > before


def _low_jobs_running(pair: Pair, cpus: int, x_priority: int = 0) -> None:
    """Cluster m0 (8 cpu, region eu), queues "x" (of ``x_priority``) and "low"; ``cpus`` 1-cpu priority-0 jobs of
    "low" admitted in a first cycle: candidate victims from the next cycle on."""
    pair.both("upsert_cluster", lambda: (Cluster("m0", labels={"region": "eu"}, allocatable={CPU: 8000, MEMORY: 64 * GI}),))
    pair.both("upsert_queue", lambda: (Queue("x", priority=x_priority),))
    pair.both("upsert_queue", lambda: (Queue("low"),))
    for i in range(cpus):
        pair.both("submit", lambda i=i: (Job(f"ns/low{i}", f"low{i}", "ns", queue="low", submit_time=float(i),
                                             tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    pair.cycle()
    assert len(pair.admitted()) == cpus


def test_searches_found_hopeless_settle() -> None:
    """Victims exist, so preemption is not idle; but the jobs of queue "x" differ only in labels the admit and
    place stages read (groups of their own) while their victim searches share one key: once the first finds no
    lower-priority victim, the others' searches are known hopeless and the rest settles."""
    pair = Pair(DEFAULT, settle_after=1)
    _low_jobs_running(pair, 2)
    labels = [{}, {"atoll.dev/region": "eu"}, {"atoll.dev/gpu-model": "a100"}, {"atoll.dev/gpu-model": "h100"}]
    for i, label in enumerate(labels):
        pair.both("submit", lambda i=i, label=label: (
            Job(f"ns/x{i}", f"x{i}", "ns", queue="x", submit_time=10.0 + i, labels=dict(label),
                tasks=[Task("t", 1, 1, {CPU: 7000, MEMORY: GI})]),))
    before = pair.settled
    pair.cycle()
    assert pair.admitted() == ["ns/low0", "ns/low1"]
    assert pair.settled == before + 3


def test_a_nominee_keeps_its_own_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """A priority-100 job evicts a victim and waits for it. A status report starts a full cycle while it still
    waits, with this cycle's dry-run budget spent (preemption idle): queue "x" takes the capacity freed and is
    refused the rest, and the checks made then look at the nominee, which is no job to settle. It must still say it waits for its victims, not get the shared
    answer of its shape."""
    pair = Pair(DEFAULT, settle_after=1)
    _low_jobs_running(pair, 8, x_priority=10)
    pair.both("submit", lambda: (Job("ns/hi", "hi", "ns", queue="low", priority=100, submit_time=20.0,
                                     tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    pair.cycle()
    hi = pair.pruned.state.jobs["ns/hi"]
    assert hi.nominated is not None
    # queue "x": one job that takes what the finish below frees, then jobs refused (more than the whole fleet)
    pair.both("submit", lambda: (Job("ns/xs", "xs", "ns", queue="x", submit_time=29.0,
                                     tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})]),))
    for i in range(40):
        pair.both("submit", lambda i=i: (Job(f"ns/big{i}", f"big{i}", "ns", queue="x", submit_time=30.0 + i,
                                             tasks=[Task("t", 1, 1, {CPU: 9000 + i, MEMORY: GI})]),))
    finished = next(j for j in pair.admitted() if j not in hi.victims)
    pair.both("finished", lambda: (finished, True, pair.now))
    monkeypatch.setattr("engine.core.nomination.DRY_RUNS_PER_CYCLE", 0)
    pair.cycle()
    assert pair.pruned.state.jobs["ns/xs"].state.holds_resources
    assert hi.nominated is not None and hi.pending_reason.startswith("preempting 1 job(s) for it (waiting)")

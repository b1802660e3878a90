"""A job whose gang minimum fits in none of its candidate clusters is judged over every candidate once per place
key, shape and excluded clusters in one state (``Engine._nowhere``), and every refusal is the exhaustive engine's.
Here the one ready cluster that could hold it (``z``) is excluded after failures: a job no ready cluster can hold
never gets that far (gang refuses it at admit)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.core.nodefit import shapes_of
from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.resources import CPU, GPU, MEMORY
from tests.core.test_pruned_exact import Pair, _copy
from tests.core.test_wake import DEFAULT, GI


def _split_fleet(pair: Pair) -> None:
    """Most cpu on one cluster, most memory on the others, and one cluster ``z`` holding both: a job asking for much
    of both passes the admit checks (``z`` holds it) but fits in none of a, b and c."""
    for name, cpu, memory in (("a", 16_000, 2 * GI), ("b", 2000, 64 * GI), ("c", 2000, 64 * GI),
                              ("z", 16_000, 64 * GI)):
        pair.both("upsert_cluster", lambda name=name, cpu=cpu, memory=memory: (
            Cluster(name, allocatable={CPU: cpu, MEMORY: memory}),))
    for n in range(4):
        pair.both("upsert_queue", lambda n=n: (Queue(f"q{n}"),))


def _job(i: int, queue: str, priority: int, excluded: frozenset[str] = frozenset()) -> Job:
    job = Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, priority=priority, submit_time=float(i),
              tasks=[Task("t", 2, 2, {CPU: 4000, MEMORY: 8 * GI})])
    job.excluded_clusters = {"z", *excluded}
    return job


def _copied(job: Job) -> Job:
    copy = _copy(job)
    copy.excluded_clusters = set(job.excluded_clusters)
    return copy


def test_jobs_that_fit_nowhere_share_one_judgement_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default policy: priority-preemption's key holds the job's priority, so 24 jobs of one shape in two
    queues are 24 groups, each examined; gpu-capacity's place key holds the queue."""
    pair = Pair(DEFAULT)
    _split_fleet(pair)
    for i in range(24):
        excluded = frozenset({"c"}) if i % 3 == 0 else frozenset()
        job = _job(i, f"q{i % 2}", i, excluded)
        pair.both("submit", lambda job=job: (_copied(job),))
    judged: list[int] = []
    decide = Engine._decide

    def counting(self: Engine, job: Job, candidates: list[Cluster]) -> Any:
        if self is pair.pruned:
            judged.append(len(candidates))
        return decide(self, job, candidates)

    monkeypatch.setattr(Engine, "_decide", counting)
    pair.cycle()                         # equal admissions (none) and refusal texts, job by job
    reasons = {job.id: job.pending_reason for job in pair.pruned.state.jobs.values()}
    assert pair.pruned._result.examined == 24
    # one judgement per queue and set of candidates: all three clusters, and a and b for the jobs excluding c
    assert sorted(judged) == [2, 2, 3, 3]
    assert reasons["ns/j0"] != reasons["ns/j2"]                  # "none of the 2 ..." against "none of the 3 ..."
    assert len(set(reasons.values())) == 2


def test_a_judgement_outlives_its_state_only_while_what_it_read_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal kept by place key serves a later state while the place stage's and the engine's placement reads
    are unchanged (an admission elsewhere: no new judgement), and not once they change (cluster c no longer
    ready: the text counts 2 candidates, as the exhaustive engine's does)."""
    pair = Pair(DEFAULT)
    _split_fleet(pair)
    judged = _judged(monkeypatch, pair)
    steps = [_job(0, "q0", 5), _small(), _job(1, "q0", 5), "c unready", _job(2, "q0", 5)]
    for step in steps:
        if step == "c unready":
            pair.both("upsert_cluster", lambda: (Cluster("c", allocatable={CPU: 2000, MEMORY: 64 * GI}, ready=False),))
        else:
            pair.both("submit", lambda step=step: (_copied(step),))
        pair.cycle()                     # equal admissions and refusal texts, job by job
    jobs = pair.pruned.state.jobs
    assert jobs["ns/small"].placement and "ns/j1" not in judged
    assert judged.count("ns/j0") == 1 and "ns/j2" in judged
    assert jobs["ns/j1"].pending_reason == jobs["ns/j0"].pending_reason != jobs["ns/j2"].pending_reason


def _small() -> Job:
    return Job("ns/small", "small", "ns", queue="q1", submit_time=0.5, tasks=[Task("t", 1, 1, {CPU: 1000, MEMORY: GI})])


def test_a_judgement_is_judged_again_when_a_place_plugin_s_read_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu-capacity's own reads (where the job's GPUs fit) are among what a kept judgement holds on: cluster c's
    GPUs taken by another job change its filter's text, and nothing the engine reads for placing changes."""
    pair = Pair(DEFAULT)
    for name, cpu, memory, gpus in (("a", 16_000, 2 * GI, 4), ("b", 2000, 64 * GI, 0), ("c", 2000, 64 * GI, 4),
                                    ("z", 16_000, 64 * GI, 4)):
        pair.both("upsert_cluster", lambda name=name, cpu=cpu, memory=memory, gpus=gpus: (
            Cluster(name, allocatable={CPU: cpu, MEMORY: memory, GPU: gpus}),))
    for n in range(2):
        pair.both("upsert_queue", lambda n=n: (Queue(f"q{n}"),))

    def gpu_job(name: str, queue: str, cpu: int, memory: int, gpus: int, replicas: int, on: str = "") -> Job:
        job = Job(f"ns/{name}", name, "ns", queue=queue, submit_time=float(len(name)),
                  tasks=[Task("t", replicas, replicas, {CPU: cpu, MEMORY: memory, GPU: gpus})])
        job.excluded_clusters = {"a", "b", "c", "z"} - {on} if on else {"z"}
        return job

    judged = _judged(monkeypatch, pair)
    for step in (gpu_job("g0", "q0", 4000, 8 * GI, 1, 2), gpu_job("taker", "q1", 100, GI, 4, 1, on="c"),
                 gpu_job("g1", "q0", 4000, 8 * GI, 1, 2)):
        pair.both("submit", lambda step=step: (_copied(step),))
        pair.cycle()
    jobs = pair.pruned.state.jobs
    assert jobs["ns/taker"].placement == {"c": {"t": 1}}
    assert "ns/g1" in judged and jobs["ns/g0"].pending_reason != jobs["ns/g1"].pending_reason


def _judged(monkeypatch: pytest.MonkeyPatch, pair: Pair) -> list[str]:
    """The ids of the jobs the pruned engine judges over their candidates (``Engine._decide``), as they come."""
    judged: list[str] = []
    decide = Engine._decide

    def counting(self: Engine, job: Job, candidates: list[Cluster]) -> Any:
        if self is pair.pruned:
            judged.append(job.id)
        return decide(self, job, candidates)

    monkeypatch.setattr(Engine, "_decide", counting)
    return judged


def test_a_judgement_does_not_outlive_its_state_once_node_shapes_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node views are not among the reads: once a cluster reports node shapes (the engine's reads unchanged), a
    judgement kept from before is not served to a later state; nor anything after a policy switch."""
    pair = Pair(DEFAULT)
    _split_fleet(pair)
    judged = _judged(monkeypatch, pair)
    pair.both("submit", lambda: (_copied(_job(0, "q0", 5)),))
    pair.cycle()
    engine = pair.pruned
    assert judged == ["ns/j0"] and engine._nowhere_seen
    later = _job(1, "q0", 6)                  # another group (priority), the same place key
    engine.state.upsert_cluster(Cluster("c", allocatable={CPU: 2000, MEMORY: 64 * GI}))    # a later state
    engine._nowhere(later, engine.state.ready_clusters())
    assert judged == ["ns/j0"]                # served: nothing it read changed
    shapes = shapes_of([{CPU: 2000, MEMORY: 64 * GI}], [1])
    engine.state.upsert_cluster(Cluster("c", allocatable={CPU: 2000, MEMORY: 64 * GI}, node_shapes=shapes))
    assert engine.state.any_node_shapes
    engine._nowhere(later, engine.state.ready_clusters())
    assert judged == ["ns/j0", "ns/j1"]
    engine.set_pipeline(engine.pipeline)
    assert not engine._nowhere_seen

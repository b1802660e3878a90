"""Admit verdicts shared across queues (engine.core.admitshare): the same decisions and reasons as the exhaustive
engine, which never shares, on queues whose lines make the admit stage answer differently for jobs of one shape
(closed, under a closed parent, a capability, a deserved share without borrowing, a GPU quota, kept guarantees);
and the sharing does happen where the queues are alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.resources import CPU, GPU, MEMORY
from tests.core.test_pruned_exact import ROOT, Pair, policy_file, policy_variant

GI = 2**30
NO_BORROWING = policy_variant("default-no-borrowing", "borrowing: true", "borrowing: false")
GPU_QUOTA = policy_variant("default-gpu-quota", "  plugins:\n", "  plugins:\n    gpu-capacity:\n      queueQuotas: {quota: 1}\n")
POLICIES = [ROOT / "policies" / "default.yaml", ROOT / "policies" / "no-preemption.yaml", NO_BORROWING, GPU_QUOTA]


def _queues() -> list[Queue]:
    return [
        Queue("open-a"), Queue("open-b"), Queue("closed", open=False),
        Queue("parent-closed", open=False), Queue("child", parent="parent-closed"),
        Queue("capped", capability={CPU: 1000}),
        Queue("deserving", deserved={CPU: 1000}),
        Queue("guaranteed", guarantee={CPU: 4000}, priority=-1),     # served last: its guarantee kept till then
        Queue("quota"),
    ]


def _jobs(start: int, count: int, gpus: int = 0) -> list[Job]:
    names = [q.name for q in _queues()]
    out = []
    for i in range(start, start + count):
        resources = {CPU: 250, MEMORY: GI, GPU: gpus} if gpus else {CPU: 3000, MEMORY: GI}
        out.append(Job(f"ns/j{i}", f"j{i}", "ns", queue=names[i % len(names)], submit_time=float(i),
                       labels={"atoll.dev/gpu-model": "a100"} if i % 3 == 0 else {},
                       tasks=[Task("w", 2, 2, resources)]))
    return out


def _copy(job: Job) -> Job:
    return Job(job.id, job.name, job.namespace, queue=job.queue, submit_time=job.submit_time,
               labels=dict(job.labels), tasks=[Task(t.name, t.replicas, t.min_available, dict(t.resources))
                                               for t in job.tasks])


def _run(pair: Pair) -> None:
    pair.both("upsert_cluster", lambda: (Cluster("m1", labels={"gpu-model": "a100"},
                                                 allocatable={CPU: 9000, MEMORY: 64 * GI, GPU: 4}),))
    for q in _queues() + [Queue("filler")]:
        pair.both("upsert_queue", lambda q=q: (Queue(q.name, parent=q.parent, open=q.open,
                                                     capability=q.capability and dict(q.capability),
                                                     deserved=q.deserved and dict(q.deserved),
                                                     guarantee=dict(q.guarantee), priority=q.priority),))
    pair.both("submit", lambda: (Job("ns/filler", "filler", "ns", queue="filler",
                                     tasks=[Task("w", 1, 1, {CPU: 4000, MEMORY: GI})]),))
    pair.cycle()
    # 5 cpu left: no cpu job below ever fits, two gpu jobs do; then every other is refused in one state, each queue's first job meeting
    # the answers kept for the others of its shape, so a queue taken for alike that is not shows as another reason
    # (under kept guarantees, before that: refused for what is kept for the guaranteed queue, naming its own queue)
    for job in _jobs(0, 40) + _jobs(40, 20, gpus=1):
        pair.both("submit", lambda job=job: (_copy(job),))
    pair.cycle()
    pair.both("upsert_queue", lambda: (Queue("closed"),))      # reopened: the alike answers are asked again
    pair.cycle()
    pair.both("upsert_queue", lambda: (Queue("open-b", open=False),))
    pair.cycle()


def _counting(engine: Engine) -> list[int]:
    calls = [0]
    ask: Callable[..., Any] = engine.pipeline.admit_positional

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return ask(*args)
    engine.pipeline.admit_positional = counted
    return calls


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.stem)
def test_shared_admits_decide_as_the_exhaustive_engine(policy: Path) -> None:
    pair = Pair(policy)
    _run(pair)
    assert pair.cycles == 4


def test_alike_queues_ask_the_admit_stage_once_per_shape_and_state() -> None:
    pair = Pair(ROOT / "policies" / "default.yaml")
    assert pair.pruned._sharing and not pair.exhaustive._sharing
    pair.both("upsert_cluster", lambda: (Cluster("m1", allocatable={CPU: 1000, MEMORY: GI}),))
    for i in range(30):
        pair.both("upsert_queue", lambda i=i: (Queue(f"q{i}"),))
    for i in range(30):              # one job per queue, one shape, none fits: 30 keys of one shared key
        pair.both("submit", lambda i=i: (Job(f"ns/j{i}", f"j{i}", "ns", queue=f"q{i}", submit_time=float(i),
                                             tasks=[Task("w", 1, 1, {CPU: 2000, MEMORY: GI})]),))
    pruned, exhaustive = _counting(pair.pruned), _counting(pair.exhaustive)
    pair.cycle()
    assert exhaustive[0] == 30
    assert pruned[0] == 1, pruned


def test_a_queue_edit_asks_again_whether_its_queue_is_alike() -> None:
    pair = Pair(ROOT / "policies" / "default.yaml")
    pair.both("upsert_cluster", lambda: (Cluster("m1", allocatable={CPU: 1000, MEMORY: GI}),))
    pair.both("upsert_queue", lambda: (Queue("a"),))
    pair.both("upsert_queue", lambda: (Queue("b"),))
    for i, queue in enumerate(("a", "b", "a", "b")):
        pair.both("submit", lambda i=i, queue=queue: (Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, submit_time=float(i),
                                                          tasks=[Task("w", 1, 1, {CPU: 2000, MEMORY: GI})]),))
    pair.cycle()
    pair.both("upsert_queue", lambda: (Queue("b", open=False),))    # b's jobs now refused by queue-state
    pair.cycle()
    assert "Closed" in pair.pruned.state.jobs["ns/j1"].pending_reason
    assert "Closed" not in pair.pruned.state.jobs["ns/j0"].pending_reason


@pytest.mark.parametrize("policy, special", [
    (GPU_QUOTA, Queue("quota", priority=10)),                           # refused by its GPU quota (1 < 2)
    (NO_BORROWING, Queue("special", priority=10, deserved={CPU: 100})),  # refused by its deserved share
    (ROOT / "policies" / "default.yaml", Queue("special", priority=10, capability={CPU: 100})),
], ids=["gpu-quota", "deserved", "capability"])
def test_a_queue_limited_by_an_admit_plugin_is_not_alike(policy: Path, special: Queue) -> None:
    """The limited queue is served first (its priority) and refused for its own limit; the next queue's job, of the
    same shape, is examined in the same state: it must not get that refusal, nor the limited one an answer kept
    for another queue."""
    pair = Pair(policy)
    pair.both("upsert_cluster", lambda: (Cluster("m1", allocatable={CPU: 8000, MEMORY: 8 * GI, GPU: 4}),))
    pair.both("upsert_queue", lambda: (Queue(special.name, priority=special.priority,
                                             capability=special.capability and dict(special.capability),
                                             deserved=special.deserved and dict(special.deserved)),))
    pair.both("upsert_queue", lambda: (Queue("other", priority=5),))
    for i, queue in enumerate((special.name, "other", special.name, "other")):
        pair.both("submit", lambda i=i, queue=queue: (Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, submit_time=float(i),
                                                          tasks=[Task("w", 2, 2, {CPU: 500, MEMORY: GI, GPU: 1})]),))
    pair.cycle()
    assert pair.pruned.state.jobs["ns/j0"].state.value == "Pending"
    assert pair.pruned.state.jobs["ns/j1"].state.value == "Admitted"


NO_CAPACITY = policy_file("no-capacity", """apiVersion: atoll.dev/v1alpha1
kind: SchedulingPolicy
metadata: {name: no-capacity}
spec:
  placementMode: bind
  pipeline:
    order: [queue-priority, fifo]
    admit: [queue-state, gpu-capacity, gang]
    place: [gpu-capacity, gang, binpack]
""")


@pytest.mark.parametrize("policy", [ROOT / "policies" / "default.yaml", NO_CAPACITY], ids=lambda p: p.stem)
def test_a_gpu_capability_of_zero_is_a_limit(policy: Path) -> None:
    """(Without the capacity plugin, whose own check of any capability would hide gpu-capacity's.)"""
    pair = Pair(policy)
    pair.both("upsert_cluster", lambda: (Cluster("m1", allocatable={CPU: 8000, MEMORY: 8 * GI, GPU: 4}),))
    pair.both("upsert_queue", lambda: (Queue("no-gpus", priority=10, capability={GPU: 0}),))
    pair.both("upsert_queue", lambda: (Queue("other", priority=5),))
    for i, queue in enumerate(("no-gpus", "other")):
        pair.both("submit", lambda i=i, queue=queue: (Job(f"ns/j{i}", f"j{i}", "ns", queue=queue, submit_time=float(i),
                                                          tasks=[Task("w", 1, 1, {CPU: 500, MEMORY: GI, GPU: 1})]),))
    pair.cycle()
    assert pair.pruned.state.jobs["ns/j0"].state.value == "Pending"
    assert pair.pruned.state.jobs["ns/j1"].state.value == "Admitted"

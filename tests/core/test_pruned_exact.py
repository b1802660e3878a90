"""Exactness of the examination loop by verdict key (engine.core.backlog): on random scenarios, an
engine that shares refusals by key decides exactly what an engine examining job by job decides.

Random fleets (readiness, labels, GPU models), queues (hierarchy, capability, guarantee, closed ones),
jobs (gangs, GPUs, model and region pins, few shapes so keys collide), and a random stream of
submissions, cycles, finishes, failures (requeue with backoff and exclusions), cluster status changes
and queue edits run through both engines with their own fresh pipeline of the same shipped policy.
After every cycle the admissions (order, placement, time), the reported reason changes and every
job's state and pending reason must be identical. Some runs bound the lookback (policy spec.lookback).
"""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.nodefit import shapes_of
from engine.core.scheduler import Engine
from engine.core.settle import SETTLE_AFTER
from engine.model import Cluster, Failure, FailureKind, Job, JobState, Queue, Task
from engine.pipeline import Pipeline
from engine.policy import load_policy
from engine.resources import CPU, GPU, MEMORY, Resources

ROOT = Path(__file__).resolve().parents[2]


# The policy files the tests write at import (parametrize needs their paths then, before any fixture): one
# directory per test process, removed when it exits (tests/test_tmp_leaks.py).
_POLICY_DIR = tempfile.TemporaryDirectory(prefix="atoll-policy-")
atexit.register(_POLICY_DIR.cleanup)


def policy_file(name: str, text: str) -> Path:
    """``text`` as ``<name>.yaml`` in this process's policy directory."""
    path = Path(_POLICY_DIR.name) / f"{name}.yaml"
    path.write_text(text)
    return path


def policy_variant(name: str, old: str, new: str) -> Path:
    """The default policy with one setting changed, written once per test process (a setting the shipped
    policies do not use still has to be exact)."""
    text = (ROOT / "policies" / "default.yaml").read_text()
    assert old in text, old
    return policy_file(name, text.replace(old, new))


# drf's Volcano rule (shares before the next job): queue keys that do not read the next job, with preemption on
SHARE_BEFORE = policy_variant("default-share-before", "progressive: true", "progressive: false")
POLICIES = sorted((ROOT / "policies").glob("*.yaml")) + [SHARE_BEFORE]
GI = 2**30
SHAPES: list[Resources] = [{CPU: 1000, MEMORY: GI}, {CPU: 1000, MEMORY: GI}, {CPU: 2000, MEMORY: 4 * GI},
                           {CPU: 4000, MEMORY: 2 * GI}, {CPU: 2000, MEMORY: 8 * GI, GPU: 1}]


def _pipeline(path: Path) -> Pipeline:
    return load_policy(path).pipeline


@st.composite
def clusters(draw: Any) -> list[Cluster]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from((0, 0, 2, 4)))
        labels = {"region": draw(st.sampled_from(("eu", "us")))}
        if gpus:
            labels["gpu-model"] = draw(st.sampled_from(("a100", "h100")))
        alloc = {CPU: draw(st.sampled_from((4000, 8000, 12000))), MEMORY: draw(st.sampled_from((8, 16, 32))) * GI}
        if gpus:
            alloc[GPU] = gpus
        out.append(Cluster(f"m{i}", labels=labels, allocatable=alloc, ready=draw(st.booleans()) or i == 0))
    return out


@st.composite
def queues(draw: Any) -> list[Queue]:
    out = [Queue("root", weight=1)] if draw(st.booleans()) else []
    for i in range(draw(st.integers(1, 4))):
        parent = "root" if out and out[0].name == "root" and draw(st.booleans()) else None
        capability = {CPU: draw(st.sampled_from((4000, 8000, 16000)))} if draw(st.booleans()) else None
        guarantee = {CPU: draw(st.sampled_from((1000, 2000)))} if draw(st.integers(0, 3)) == 0 else {}
        out.append(Queue(f"q{i}", parent=parent, weight=draw(st.integers(1, 3)), priority=draw(st.sampled_from((0, 5))),
                         open=draw(st.integers(0, 5)) > 0, capability=capability, guarantee=guarantee))
    return out


@st.composite
def jobs(draw: Any, queue_names: list[str], start: int) -> list[Job]:
    out = []
    for i in range(start, start + draw(st.integers(1, 20))):
        tasks = []
        for t in range(draw(st.sampled_from((1, 1, 1, 2)))):
            replicas = draw(st.integers(1, 3))
            minimum = replicas if draw(st.booleans()) else draw(st.integers(0, replicas))
            tasks.append(Task(f"t{t}", replicas, minimum, dict(draw(st.sampled_from(SHAPES)))))
        labels: dict[str, str] = {}
        if draw(st.integers(0, 4)) == 0:
            labels["atoll.dev/region"] = draw(st.sampled_from(("eu", "us")))
        if draw(st.integers(0, 4)) == 0:
            labels["atoll.dev/gpu-model"] = draw(st.sampled_from(("a100", "h100")))
        out.append(Job(f"ns/j{i}", f"j{i}", "ns", queue=draw(st.sampled_from(queue_names)),
                       priority=draw(st.sampled_from((0, 0, 1))), labels=labels, submit_time=float(i), tasks=tasks))
    return out


def _copy(job: Job) -> Job:
    return Job(job.id, job.name, job.namespace, queue=job.queue, priority=job.priority, labels=dict(job.labels),
               submit_time=job.submit_time, tasks=[Task(t.name, t.replicas, t.min_available, dict(t.resources))
                                                   for t in job.tasks])


def _renamed(job: Job, i: int) -> Job:
    """A copy of ``job`` as the i-th job submitted (id, name, arrival)."""
    out = _copy(job)
    out.id, out.name, out.submit_time = f"ns/j{i}", f"j{i}", float(i)
    return out


def _reported(c: Cluster, nodes: bool, **changes: Any) -> Cluster:
    """A status report of ``c``; with ``nodes``, resource models saying it is two equal nodes (node shapes)."""
    report = _cluster_copy(c, **changes)
    if nodes:
        half = {name: amount // 2 for name, amount in c.allocatable.items()}
        report.node_shapes = shapes_of([{name: 0 for name in half}, half], [0, 2])
    return report


def _cluster_copy(c: Cluster, **changes: Any) -> Cluster:
    fields: dict[str, Any] = dict(name=c.name, labels=dict(c.labels), ready=c.ready, allocatable=dict(c.allocatable),
                  allocated=dict(c.allocated), allocating=dict(c.allocating), status_time=c.status_time)
    fields.update(changes)
    return Cluster(**fields)


def _snapshot(engine: Engine) -> dict[str, tuple[Any, ...]]:
    return {j.id: (j.state, j.pending_reason, j.placement, j.attempts, j.not_before)
            for j in engine.state.jobs.values()}


class Pair:
    """The same inputs to a pruned and an exhaustive engine, compared after every cycle."""

    def __init__(self, policy: Path, lookback: int = 0, settle_after: int = SETTLE_AFTER) -> None:
        pipelines = _pipeline(policy), _pipeline(policy)
        for pipeline in pipelines:
            pipeline.lookback = lookback
        self.pruned = Engine(pipelines[0])
        self.pruned.settle_after = settle_after     # low: the settled rest of a cycle is tried on small scenarios
        self.exhaustive = Engine(pipelines[1], exhaustive=True)
        assert self.pruned._keyed, f"{policy.name}: every shipped admit/place plugin declares a verdict_key"
        self.now = 0.0
        self.cycles = 0
        self.shared = 0
        self.settled = 0

    def both(self, method: str, make: Any) -> None:
        getattr(self.pruned, method)(*make())
        getattr(self.exhaustive, method)(*make())

    def cycle(self) -> None:
        self.now += 1.0
        a = self.pruned.cycle(self.now)
        b = self.exhaustive.cycle(self.now)
        assert [(x.job_id, x.queue, x.placement, x.at) for x in a.admitted] == \
            [(x.job_id, x.queue, x.placement, x.at) for x in b.admitted]
        assert a.reasons == b.reasons
        assert a.full == b.full
        assert a.examined <= b.examined
        self.shared += b.examined - a.examined
        self.settled += a.settled
        assert _snapshot(self.pruned) == _snapshot(self.exhaustive)
        self.cycles += 1

    def admitted(self) -> list[str]:
        return sorted(j.id for j in self.pruned.state.jobs.values() if j.state.holds_resources)


def populate(pair: "Pair", data: Any) -> tuple[list[Cluster], list[Queue], list[str]]:
    """Draw clusters and queues and give each engine of ``pair`` its own copies; also the queue names jobs may
    use."""
    fleet = data.draw(clusters())
    qs = data.draw(queues())
    for c in fleet:
        pair.both("upsert_cluster", lambda c=c: (_cluster_copy(c),))
    for q in qs:
        pair.both("upsert_queue", lambda q=q: (Queue(q.name, parent=q.parent, weight=q.weight, priority=q.priority,
                                                     open=q.open, capability=q.capability and dict(q.capability),
                                                     guarantee=dict(q.guarantee)),))
    names = [q.name for q in qs if q.name != "root"]
    return fleet, qs, names


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.stem)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_pruned_decides_exactly_as_exhaustive(policy: Path, data: Any) -> None:
    pair = Pair(policy, lookback=data.draw(st.sampled_from((0, 0, 2, 5)), label="lookback"),
                settle_after=data.draw(st.sampled_from((1, 2, 4, SETTLE_AFTER)), label="settle_after"))
    play(pair, data, *populate(pair, data))


def play(pair: Pair, data: Any, fleet: list[Cluster], qs: list[Queue], names: list[str]) -> None:
    """A random stream of submissions, finishes, failures, status reports and queue edits through ``pair``, a
    cycle after each, then three cycles that free capacity for the rest of the backlog."""
    submitted = 0
    for _ in range(data.draw(st.integers(3, 16))):
        op = data.draw(st.sampled_from(("submit", "submit", "cycle", "finish", "finish", "finish", "fail", "cluster",
                                        "queue")))
        if op == "submit":
            batch = data.draw(jobs(names, submitted))
            if data.draw(st.booleans()):      # each job and 3 more of its key: groups the walk goes through by key
                batch = [_renamed(j, submitted + 4 * i + k) for i, j in enumerate(batch) for k in range(4)]
            submitted += len(batch)
            for j in batch:
                pair.both("submit", lambda j=j: (_copy(j),))
        elif op == "finish" and pair.admitted():
            for job_id in data.draw(st.lists(st.sampled_from(pair.admitted()), min_size=1, max_size=3, unique=True)):
                pair.both("finished", lambda job_id=job_id: (job_id, True, pair.now))
        elif op == "fail" and pair.admitted():
            job_id = data.draw(st.sampled_from(pair.admitted()))
            placed = sorted(pair.pruned.state.jobs[job_id].placement or {})
            failure = Failure(FailureKind.JOB_FAILED, placed[0] if placed else None, "boom")
            pair.both("fail", lambda: (job_id, failure, pair.now))
        elif op == "cluster":
            c = data.draw(st.sampled_from(fleet))
            ready = data.draw(st.booleans())
            used = {CPU: data.draw(st.sampled_from((0, 1000, 3000)))}
            nodes = data.draw(st.integers(0, 3)) == 0       # now and then its report models two equal nodes
            pair.both("upsert_cluster", lambda: (_reported(c, nodes, ready=ready, allocated=used,
                                                           status_time=pair.now),))
        elif op == "queue":
            q = data.draw(st.sampled_from(qs))
            opened = data.draw(st.booleans())
            pair.both("upsert_queue", lambda: (Queue(q.name, parent=q.parent, weight=q.weight, priority=q.priority,
                                                     open=opened, capability=q.capability and dict(q.capability),
                                                     guarantee=dict(q.guarantee)),))
        pair.cycle()
    for _ in range(3):        # drain: finishes free capacity for the rest of the backlog
        for job_id in pair.admitted()[:2]:
            pair.both("finished", lambda job_id=job_id: (job_id, True, pair.now))
        pair.cycle()


def test_the_comparison_is_not_vacuous() -> None:
    """A fixed scenario where sharing must happen: the pruned engine calls the pipeline less."""
    for policy in POLICIES:
        pair = Pair(policy)
        pair.both("upsert_cluster", lambda: (Cluster("m0", labels={"region": "eu"}, allocatable={CPU: 4000, MEMORY: 8 * GI}),))
        pair.both("upsert_queue", lambda: (Queue("q0"),))
        for i in range(60):        # 2 pods fit the cluster, 3 never do (for every policy)
            j = Job(f"ns/j{i}", f"j{i}", "ns", queue="q0", submit_time=float(i),
                    tasks=[Task("t", 2 + i % 2, 2 + i % 2, {CPU: 1500, MEMORY: GI})])
            pair.both("submit", lambda j=j: (_copy(j),))
        pair.cycle()
        for _ in range(3):
            first: Optional[str] = pair.admitted()[0] if pair.admitted() else None
            if first is not None:
                pair.both("finished", lambda first=first: (first, True, pair.now))
            pair.cycle()
        assert pair.shared > 50, policy.name


@pytest.mark.parametrize("policy", [ROOT / "policies" / "default.yaml", SHARE_BEFORE], ids=["default", "share-before"])
def test_a_preemption_issued_mid_turn_changes_the_refusals_after_it(policy: Path) -> None:
    """Y and X share a verdict key; P, between them in the queue's order, preempts and its nomination books
    capacity. The refusal Y got was given before that booking: X must be examined again, not handed Y's text."""
    pair = Pair(policy)
    pair.both("upsert_cluster", lambda: (Cluster("a", labels={"region": "r1"}, allocatable={CPU: 6000, MEMORY: 64 * GI}),))
    pair.both("upsert_cluster", lambda: (Cluster("b", labels={"region": "r2"},
                                                 allocatable={CPU: 4000, MEMORY: 64 * GI, GPU: 1}),))
    pair.both("upsert_queue", lambda: (Queue("q"),))

    def job(name: str, t: float, priority: int, resources: Resources, pods: int = 1, region: str = "") -> Job:
        return Job(f"ns/{name}", name, "ns", queue="q", priority=priority, submit_time=t,
                   labels={"atoll.dev/region": region} if region else {},
                   tasks=[Task("t", pods, pods, dict(resources, **{MEMORY: GI}))])

    running = [job("low", 0, 0, {CPU: 2000}, pods=2, region="r1"),     # 4 cpu on a: a victim for rank 5
               job("keep", 0.5, 5, {CPU: 2000}, region="r2")]          # 2 cpu on b: not one
    for j in running:
        pair.both("submit", lambda j=j: (_copy(j),))
    pair.cycle()
    assert pair.admitted() == ["ns/keep", "ns/low"]
    waiting = [job("y", 1, 5, {CPU: 4000, GPU: 1}),      # fleet 4 cpu free, no cluster with 4 and the GPU;
               job("p", 2, 5, {CPU: 6000}),              # evicting low frees a for p (not for y: no GPU there)
               job("x", 3, 5, {CPU: 4000, GPU: 1})]      # y's key, after p's booking: 2 cpu free in the fleet
    for j in waiting:
        pair.both("submit", lambda j=j: (_copy(j),))
    pair.cycle()
    assert [p.preemptor for p in pair.pruned._result.preemptions] == ["ns/p"]
    reasons = {j: pair.pruned.state.jobs[j].pending_reason for j in ("ns/y", "ns/x")}
    assert reasons["ns/x"] != reasons["ns/y"] and "more than the fleet has free" in reasons["ns/x"]

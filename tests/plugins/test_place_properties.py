"""Property tests: random fleets and job streams through a real Engine with the placement plugins.

* gang is never partial: every admitted job has >= minAvailable (and <= replicas) of every
  task placed, all in one cluster unless split is allowed (or, for spread, the job is no gang);
* nothing is over-committed: on every cluster, reported usage plus Atoll's in-flight
  reservations never exceed allocatable, through admissions, starts, status reports,
  finishes, failures and requeues;
* GPU jobs asking for a model run only on clusters of that model, within their queue's GPU quota;
* cluster-filter (CEL) is respected;
* the same stream gives the same decisions.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.policy.cel import CelCompiler
from engine.core.scheduler import Engine
from engine.model import Cluster, Failure, FailureKind, Job, JobState, Queue, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import CPU, GPU, MEMORY, Resources, add_into
from plugins._placeutil import is_gang, placed_counts
from plugins.binpack import Binpack
from plugins.cluster_cel import ClusterFilter, ClusterScore
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity
from plugins.requeue_backoff import RequeueBackoff
from plugins.spread import Spread

GI = 2**30
MODELS = ("a100", "h100")


CEL = CelCompiler()
FILTER = "!('zone' in job.labels) || cluster.labels['zone'] == job.labels['zone']"
QUOTA = 4


def pipeline(variant: str) -> Pipeline:
    stages: dict[str, list[Plugin]]
    recover: list[Plugin] = [RequeueBackoff({"initialDelay": 1, "maxAttempts": 3}, None)]
    if variant == "one-cluster":
        g, gpu = Gang({}, None), GpuCapacity({"queueQuotas": {"q1": QUOTA}}, None)
        zone = ClusterFilter({"expression": FILTER}, CEL)
        score = ClusterScore({"expression": "cluster.labels['zone'] == 'z0' ? 1 : 0", "weight": 50}, CEL)
        stages = {"admit": [g, gpu], "place": [gpu, zone, score, Binpack({}, None), g], "recover": recover}
    elif variant == "split":
        g, gpu = Gang({"allowSplit": True}, None), GpuCapacity({"allowSplit": True}, None)
        stages = {"admit": [gpu, g], "place": [gpu, Spread({}, None), g], "recover": recover}
    else:                                     # spread divides non-gang jobs, gang places the rest
        g, gpu = Gang({}, None), GpuCapacity({}, None)
        stages = {"admit": [gpu, g], "place": [gpu, Spread({"splitReplicas": True}, None), g], "recover": recover}
    return Pipeline(stages)


clusters_st = st.lists(
    st.tuples(st.integers(0, 16), st.integers(0, 64), st.integers(0, 8), st.sampled_from(MODELS)),
    min_size=1, max_size=4)

task_st = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 16), st.integers(0, 16), st.integers(0, 2))

jobs_st = st.lists(
    st.tuples(st.lists(task_st, min_size=1, max_size=3), st.sampled_from(("", "a100", "h100")), st.integers(0, 2),
              st.sampled_from(("", "z0", "z1"))),
    min_size=1, max_size=12)

actions_st = st.lists(st.tuples(st.sampled_from(("cycle", "start", "report", "finish", "fail", "cycle")),
                                st.integers(0, 100)), max_size=25)


def build_jobs(spec: list[Any]) -> list[Job]:
    jobs = []
    for i, (tasks, model, queue, zone) in enumerate(spec):
        built = []
        for k, (replicas, min_available, cpu_halves, mem, gpu) in enumerate(tasks):
            resources = {CPU: cpu_halves * 500, MEMORY: mem * GI, GPU: gpu}
            built.append(Task(f"t{k}", replicas, min(min_available, replicas),
                              {n: v for n, v in resources.items() if v}))
        labels = {"atoll.dev/gpu-model": model} if model else {}
        if zone:
            labels["zone"] = zone
        jobs.append(Job(id=f"j{i}", name=f"j{i}", queue=f"q{queue}", tasks=built, labels=labels))
    return jobs


def run(variant: str, cluster_spec: list[Any], job_spec: list[Any], actions: list[Any]) -> list[Any]:
    engine = Engine(pipeline(variant))
    for i, (cpu, mem, gpu, model) in enumerate(cluster_spec):
        engine.upsert_cluster(Cluster(f"c{i}", labels={"gpu-model": model, "zone": f"z{i % 2}"},
                                      allocatable={k: v for k, v in {CPU: cpu * 1000, MEMORY: mem * GI, GPU: gpu}.items() if v}))
    for q in range(3):
        engine.upsert_queue(Queue(f"q{q}"))
    for job in build_jobs(job_spec):
        engine.submit(job)
    log: list[Any] = []
    now = 0.0
    for action, pick in [("cycle", 0), *actions, ("cycle", 0)]:
        now += 1
        holding = sorted(j.id for j in engine.state.jobs.values() if j.state.holds_resources)
        target = holding[pick % len(holding)] if holding else None
        if action == "cycle":
            result = engine.cycle(now)
            log.append([(a.job_id, sorted((c, sorted(p.items())) for c, p in a.placement.items()))
                        for a in result.admitted])
        elif action == "start" and target:
            engine.started(target, now)
        elif action == "report":
            report(engine, now)
        elif action == "finish" and target:
            engine.finished(target)
        elif action == "fail" and target:
            placement = engine.state.jobs[target].placement or {}
            log.append(engine.fail(target, Failure(FailureKind.JOB_FAILED, min(placement, default=None)), now).reason)
        check(engine, variant)
    return log


def report(engine: Engine, now: float) -> None:
    """Each cluster reports what its running jobs use, as Karmada's status controller would."""
    used: dict[str, Resources] = {}
    for job in engine.state.jobs.values():
        if job.state is JobState.RUNNING:
            for name in job.placement or {}:
                add_into(used.setdefault(name, {}), job.placed_demand(name))
    for old in list(engine.state.clusters.values()):
        engine.upsert_cluster(Cluster(old.name, labels=dict(old.labels), allocatable=dict(old.allocatable),
                                      allocated=used.get(old.name, {}), status_time=now + 0.5))


def check(engine: Engine, variant: str) -> None:
    state = engine.state
    for name, c in state.clusters.items():
        booked: Resources = dict(c.allocated)
        for reserved, _ in state.inflight(name).values():
            add_into(booked, reserved)
        for freed, _ in state.credits(name).values():       # finished since the report: pods are gone
            add_into(booked, freed, -1)
        actual: Resources = {}
        for job in state.jobs.values():
            if job.state.holds_resources:
                add_into(actual, job.placed_demand(name))
        for resource in set(booked) | set(actual):
            cap = c.allocatable.get(resource, 0)
            assert booked.get(resource, 0) <= cap, f"{name} over-committed on {resource}: {booked} > {c.allocatable}"
            assert actual.get(resource, 0) <= cap, f"{name} holds more than it has on {resource}"
    for job in state.jobs.values():
        if not job.state.holds_resources:
            continue
        placement = job.placement or {}
        counts = placed_counts(placement)
        for t in job.tasks:
            assert t.min_available <= counts.get(t.name, 0) <= t.replicas, f"{job.id} partial gang: {placement}"
        assert sum(counts.values()) or not any(t.replicas for t in job.tasks), f"{job.id} admitted with nothing"
        splittable = variant == "split" or (variant == "spread-split" and not is_gang(job))
        if not splittable:
            assert len(placement) <= 1, f"{job.id} split over {sorted(placement)}"
        model = job.labels.get("atoll.dev/gpu-model")
        if model and job.demand.get(GPU):
            assert all(state.clusters[c].labels["gpu-model"] == model for c in placement)
        assert not (set(placement) & job.excluded_clusters)
        if variant == "one-cluster" and "zone" in job.labels:
            assert all(state.clusters[c].labels["zone"] == job.labels["zone"] for c in placement)
    if variant == "one-cluster":
        gpus = sum(j.demand.get(GPU, 0) for j in state.jobs.values() if j.queue == "q1" and j.state.holds_resources)
        assert gpus <= QUOTA, f"queue q1 holds {gpus} GPUs, quota {QUOTA}"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(("one-cluster", "split", "spread-split")), clusters_st, jobs_st, actions_st)
def test_never_partial_never_over_committed_and_deterministic(variant: str, cluster_spec: list[Any],
                                                              job_spec: list[Any], actions: list[Any]) -> None:
    first = run(variant, cluster_spec, job_spec, actions)
    assert run(variant, cluster_spec, job_spec, actions) == first


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.integers(0, 200))
def test_division_helpers_place_every_replica_within_bounds(available: list[int], replicas: int) -> None:
    from plugins.karmada_divided import divide_by_available
    from plugins.spread import divide_evenly

    ranked = sorted(((f"c{i}", n) for i, n in enumerate(available)), key=lambda x: (-x[1], x[0]))
    if sum(available) >= replicas:
        karmada = divide_by_available(ranked, replicas)
        assert sum(karmada.values()) == replicas and min(karmada.values()) >= 0
        even = divide_evenly(replicas, available)
        assert even is not None and sum(even) == replicas
        assert all(0 <= n <= cap for n, cap in zip(even, available))
        # even: no slot with spare room has two fewer than another slot
        assert all(not (a < cap_a and a + 1 < b) for a, cap_a in zip(even, available) for b in even)
    else:
        assert divide_evenly(replicas, available) is None

"""Offering place plugins only the clusters where a job's gang minimum fits never changes a decision.

Engine._place first judges the clusters where ``job.min_demand`` fits when every place
plugin declares ``judges_fitting_clusters_only()``, and falls back to the whole list on a
refusal. These tests compare it, on random fleets with random usage, against judging
every ready cluster (``Engine._decide`` over all of them): the placement, or the refusal
with its reason, must be identical.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.policy.cel import CelCompiler
from engine.core.scheduler import Engine
from engine.core.state import FleetState
from engine.model import Cluster, Job, Queue, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import CPU, GPU, MEMORY, fits
from plugins.binpack import Binpack
from plugins.cluster_cel import ClusterFilter, ClusterScore
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity
from plugins.karmada_divided import KarmadaDivided
from plugins.spread import Spread

GI = 2**30
CEL = CelCompiler()
ZONE = "!('zone' in job.labels) || cluster.labels['zone'] == job.labels['zone']"
ROOMY = "cluster.free['cpu'] >= 2000"          # reads free capacity: the cache keyed on it


def place_stage(variant: str) -> list[Plugin]:
    gpu = GpuCapacity({}, None)
    if variant == "default":
        return [ClusterFilter({"expression": ZONE}, CEL), gpu, Gang({}, None), Binpack({}, None)]
    if variant == "scored":
        return [gpu, ClusterFilter({"expression": ROOMY}, CEL),
                ClusterScore({"expression": "cluster.labels['zone'] == 'z1' ? 3 : 0", "weight": 20}, CEL),
                Spread({}, None), Binpack({"weight": 2}, None), Gang({}, None)]
    return [gpu, Binpack({}, None)]              # "no-place": the engine's own whole-job placement


cluster_st = st.tuples(st.integers(0, 16), st.integers(0, 16), st.integers(0, 8), st.integers(0, 16),
                       st.integers(0, 8), st.booleans())
task_st = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 8), st.integers(0, 4), st.integers(0, 2))


def build(variant: str, spec: list[Any]) -> Engine:
    engine = Engine(Pipeline({"place": place_stage(variant)}))
    for i, (cpu, mem, gpu, used_cpu, used_mem, ready) in enumerate(spec):
        allocatable = {CPU: cpu * 1000, MEMORY: mem * GI, GPU: gpu}
        engine.upsert_cluster(Cluster(f"c{i}", labels={"zone": f"z{i % 3}", "gpu-model": "a100"}, ready=ready,
                                      allocatable=allocatable,
                                      allocated={CPU: min(cpu, used_cpu) * 1000, MEMORY: min(mem, used_mem) * GI}))
    engine.upsert_queue(Queue("q"))
    return engine


def make_job(tasks: list[Any], zone: str) -> Job:
    built = []
    for k, (replicas, minimum, cpu, mem, gpu) in enumerate(tasks):
        asks = {CPU: cpu * 500, MEMORY: mem * GI, GPU: gpu}
        built.append(Task(f"t{k}", replicas, min(minimum, replicas), {n: v for n, v in asks.items() if v}))
    return Job(id="j", name="j", queue="q", tasks=built, labels={"zone": zone} if zone else {})


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(("default", "scored", "no-place")), st.lists(cluster_st, min_size=1, max_size=7),
       st.lists(task_st, min_size=1, max_size=3), st.sampled_from(("", "z0", "z1")))
def test_judging_fitting_clusters_first_decides_exactly_as_judging_all(variant: str, spec: list[Any],
                                                                       tasks: list[Any], zone: str) -> None:
    judged, full = build(variant, spec), build(variant, spec)     # two engines: no cache shared
    assert judged.pipeline.fitting_clusters_only
    for engine in (judged, full):
        engine.submit(make_job(tasks, zone))
    ready = full.state.ready_clusters()
    if ready:
        expected = full._decide(full.state.jobs["j"], list(ready))
        assert judged._place(judged.state.jobs["j"]) == expected


def test_splitting_plugins_see_every_cluster() -> None:
    assert Pipeline({"place": place_stage("default")}).fitting_clusters_only
    assert not Pipeline({"place": [Gang({"allowSplit": True}, None)]}).fitting_clusters_only
    assert not Pipeline({"place": [Spread({"splitReplicas": True}, None)]}).fitting_clusters_only
    assert not Pipeline({"place": [KarmadaDivided({}, None), Binpack({}, None)]}).fitting_clusters_only

    class Outside(Plugin):          # a third-party plugin that says nothing is never pruned for
        name = "outside"
        stages = ("place",)

    assert not Pipeline({"place": [Binpack({}, None), Outside({}, None)]}).fitting_clusters_only


def test_a_refusal_keeps_the_reason_naming_every_filtered_cluster() -> None:
    engine = build("default", [(8, 8, 0, 0, 0, True), (1, 1, 0, 0, 0, True), (8, 8, 0, 0, 0, True)])
    job = make_job([(1, 1, 4, 1, 0)], "z1")        # c0 and c2 are in other zones; c1 is too small
    engine.submit(job)
    refusal = engine._place(job)
    assert refusal == engine._decide(job, list(engine.state.ready_clusters()))
    # judged over the fitting c0 and c2 alone it would read "no cluster fits: c0: cluster-filter ..."
    assert getattr(refusal, "reason", "") == "gang needs cpu=2 memory=1Gi in one cluster; none of the 1 " \
                                             "candidate cluster(s) has it free"


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=6),
       st.dictionaries(st.sampled_from((CPU, MEMORY, GPU)), st.integers(0, 6000)))
def test_clusters_fitting_equals_checking_each_cluster(spec: list[Any], need: dict[str, int]) -> None:
    state = FleetState()
    for i, (cpu, gpu) in enumerate(spec):
        state.upsert_cluster(Cluster(f"c{i}", allocatable={CPU: cpu * 1000, GPU: gpu}))
    clusters = state.ready_clusters()
    assert state.clusters_fitting(need, clusters) == [c for c in clusters if fits(need, state.free(c.name))]

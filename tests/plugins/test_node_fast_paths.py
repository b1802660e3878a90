"""The per-job shortcuts on clusters that report node shapes answer what the straightforward checks answer,
refusal texts included: the fleet-wide most replicas per pod shape (``FitIndex.counts``, kept incrementally
as clusters shrink, grow, turn NotReady), gang's admit (minimum and refusal shared by job shape),
binpack's node-aware scores (one pass, replica counts per shape) and gpu-capacity's node check (canonical
GPU pods). Random node views, bookings and reports; every answer compared after every change."""

from __future__ import annotations

from typing import Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.nodefit import shapes_of
from engine.core.state import FleetState
from engine.model import Cluster, Job, JobState, Refusal, Task
from engine.resources import CPU, GPU, fits, format_resources
from plugins._placeutil import pods_text, resource_weights, utilisation_scores
from plugins.gang import Gang
from plugins.gpu_capacity import GpuCapacity
from tests.core.test_nodefit_fast import straight

GRADES = [{GPU: g, CPU: 4000 * g} for g in range(9)]
ALLOCATABLE = {GPU: 64, CPU: 256_000}
POD = st.tuples(st.sampled_from((0, 1, 2, 4, 8)), st.sampled_from((1000, 2000, 4000, 8000)))   # gpus, cpu
TASK = st.tuples(POD, st.integers(0, 4), st.integers(0, 3))          # per pod, minAvailable, extra replicas
REPORT = st.tuples(st.lists(st.integers(0, 3), min_size=9, max_size=9), st.booleans())   # node counts, ready
EVENT = st.one_of(st.tuples(st.just("hold"), st.integers(0, 3), POD, st.integers(1, 4)),
                  st.tuples(st.just("report"), st.integers(0, 3), REPORT))


def make_job(spec: list[tuple[tuple[int, int], int, int]], n: int) -> Job:
    tasks = [Task(f"t{i}", max(low + extra, 1), low, {CPU: cpu, **({GPU: gpus} if gpus else {})})
             for i, ((gpus, cpu), low, extra) in enumerate(spec)]
    return Job(id=f"ask{n}", name=f"ask{n}", queue="q", tasks=tasks)


def hold(state: FleetState, names: list[str], event: tuple, n: int) -> Job:
    """Book a ("hold", cluster index, (gpus, cpu), pods) event as a job admitted on that cluster (in flight, so
    that ``release`` gives it back)."""
    _, where, (gpus, cpu), count = event
    job = Job(id=f"held{n}", name=f"held{n}", queue="q",
              tasks=[Task("t", count, count, {CPU: cpu, **({GPU: gpus} if gpus else {})})])
    job.placement, job.state = {names[where % len(names)]: {"t": count}}, JobState.ADMITTED
    state.jobs[job.id] = job
    state.hold(job)
    return job


def gang_reference(job: Job, state: FleetState) -> Optional[Refusal]:
    """gang's admit before the shortcuts, with the fleet-wide check done cluster by cluster."""
    need, have = job.min_demand, state.max_free
    if fits(need, have):
        ready = [c.name for c in state.ready_clusters()]
        if any(straight(state, name, job.min_pods) for name in ready):
            return None
        return Refusal(f"gang needs {format_resources(need)} in one cluster and its pods ({pods_text(job.min_pods)}) "
                       f"on nodes: no ready cluster's nodes can hold them (node shapes from resource models)",
                       "gang", capacity=True)
    return Refusal(f"gang needs {format_resources(need)} in one cluster; no ready cluster has that much free",
                   "gang", capacity=True)


def score_reference(job: Job, cluster: Cluster, state: FleetState, weights: dict[str, int]) -> Optional[int]:
    """utilisation_scores' node-aware score of one cluster before the shortcuts."""
    free = state.free(cluster.name)
    for need, pods in ((job.demand, job.pods), (job.min_demand, job.min_pods)):
        if straight(state, cluster.name, pods):
            total = score = 0
            for name, weight in resource_weights(need, weights).items():
                cap, want = cluster.allocatable.get(name, 0), need[name]
                if want > free.get(name, 0) or cap <= 0:
                    return None
                score += weight * ((cap - free.get(name, 0) + want) * 100 // cap)
                total += weight
            return score // total if total else 0
        if need == job.min_demand:
            break
    return None


def gpu_filter_reference(plugin: GpuCapacity, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, str]:
    want, minimum = plugin.job_gpus(job)
    out: dict[str, str] = {}
    if not want:
        return out
    pods = plugin.gpu_pods(job)
    for cluster in clusters:
        free = state.free(cluster.name)
        if not fits(minimum, free):
            out[cluster.name] = f"less than {format_resources(minimum)} free"
        elif state.nodes(cluster.name) is not None and not state._fits_tasks(cluster.name, pods):   # unmemoised
            out[cluster.name] = (f"{format_resources(minimum)} free in total but not on its nodes "
                                 f"(GPU pods: {', '.join(f'{n} x {format_resources(g)}' for g, n in pods)})")
    return out


@settings(max_examples=200, deadline=None)
@given(reports=st.lists(REPORT, min_size=2, max_size=4), events=st.lists(EVENT, max_size=10),
       asks=st.lists(st.lists(TASK, min_size=1, max_size=2), min_size=1, max_size=5),
       weights=st.sampled_from(({}, {GPU: 3, CPU: 1})))
def test_shortcuts_equal_straightforward_checks(reports: list, events: list, asks: list,
                                                weights: dict[str, int]) -> None:
    state = FleetState()
    names = [f"c{i}" for i in range(len(reports))]
    for name, (counts, ready) in zip(names, reports):
        state.upsert_cluster(Cluster(name, allocatable=dict(ALLOCATABLE), ready=ready,
                                     node_shapes=shapes_of(GRADES, counts)))
    gang, gpu = Gang({}, None), GpuCapacity({}, None)
    n = 0
    for event in [None, *events]:
        if event is not None and event[0] == "hold":
            n += 1
            hold(state, names, event, n)
        elif event is not None:
            _, where, (counts, ready) = event
            name = names[where % len(names)]
            state.upsert_cluster(Cluster(name, allocatable=dict(ALLOCATABLE), ready=ready,
                                         node_shapes=shapes_of(GRADES, counts)))
        clusters = [state.clusters[name] for name in names]
        ready_names = [c.name for c in state.ready_clusters()]
        for spec in asks:       # every ask twice (new Job objects of one shape): the memos are exercised
            for _ in range(2):
                n += 1
                job = make_job(spec, n)
                for per_pod, _count in job.min_pods:
                    most = max((state._replicas_fit(name, per_pod) for name in ready_names), default=0)
                    assert state._replica_counts(per_pod)[1] == most
                wanted = any(straight(state, name, job.min_pods) for name in ready_names)
                assert state.fits_somewhere(job.min_demand, job.min_pods) == wanted
                assert gang.atoll_admit(job, state) == gang_reference(job, state)
                assert utilisation_scores(job, clusters, state.free, weights, state) == \
                    [score_reference(job, c, state, weights) for c in clusters]
                assert gpu.atoll_filter(job, clusters, state) == gpu_filter_reference(gpu, job, clusters, state)


def test_score_of_the_minimum_when_only_it_fits_on_nodes() -> None:
    """A task with minAvailable 0 asks for GPUs no node has: the cluster scores the minimum (cpu only, its
    own weights), as the straightforward score does."""
    state = FleetState()
    nodes = shapes_of(GRADES, [0, 0, 1] + [0] * 6)                 # one node: 2 GPUs, 8 cpu
    state.upsert_cluster(Cluster("c0", allocatable=dict(ALLOCATABLE), node_shapes=nodes))
    job = make_job([((0, 8000), 1, 0), ((8, 1000), 0, 1)], 0)
    clusters = list(state.clusters.values())
    assert utilisation_scores(job, clusters, state.free, {}, state) == [score_reference(job, clusters[0], state, {})]
    assert score_reference(job, clusters[0], state, {}) == 8000 * 100 // 256_000 == 3

"""gpu-capacity: GPU-aware admission and cluster filtering.

GPUs are extended resources (``nvidia.com/gpu`` and any resource matching the
configured names/globs). A job may ask for GPU models through a label or annotation
(``atoll.dev/gpu-model: a100`` or ``a100,h100``); a cluster's model is its
``gpu-model`` label or, failing that, NVIDIA GPU feature discovery's
``nvidia.com/gpu.product``. Queues may have a GPU quota (``queueQuotas``) and/or a
capability on a GPU resource; both are checked for the queue and its ancestors.

Admit refuses in O(1) when the job's GPU minimum exceeds the most free GPUs in one
cluster; the model check walks only the clusters of the requested model (cached per
set of clusters). The place-stage filter removes clusters without the model or
without enough free GPUs.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Hashable, Optional

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Pods, Queue, Refusal, pods_of
from engine.plugin import Plugin
from engine.resources import Resources, fits, format_resources
from plugins._placeutil import ReasonCache, configure

_ONE = "needs {need} in one cluster; no ready cluster has that much free"
_SHORT = "less than {need} free"


class GpuCapacity(Plugin):
    """GPU quotas per queue, GPU model matching, and a filter on free GPUs per cluster."""

    name = "gpu-capacity"
    stages = ("admit", "place")
    description = "GPU quotas per queue, GPU model matching via cluster labels, and free-GPU cluster filtering"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.patterns: list[str] = list(self.config["gpuResources"])
        self.job_key: str = self.config["jobKey"]
        self.cluster_labels: list[str] = [self.config["clusterLabel"], *self.config["fallbackClusterLabels"]]
        self.quotas: dict[str, int] = dict(self.config["queueQuotas"])
        self.allow_split = bool(self.config["allowSplit"])
        self._is_gpu: dict[str, bool] = {}
        self._reasons = ReasonCache()
        self._job_gpus: dict[int, tuple[Resources, Resources]] = {}           # by job shape
        self._gpu_pods: dict[int, tuple[tuple[tuple[Resources, int], ...], Pods]] = {}   # by job shape
        self._model_index: tuple[Optional[list[Cluster]], dict[str, list[str]]] = (None, {})

    # -- helpers ------------------------------------------------------------------------------
    def is_gpu(self, resource: str) -> bool:
        known = self._is_gpu.get(resource)
        if known is None:
            known = self._is_gpu[resource] = any(fnmatch.fnmatchcase(resource, p) for p in self.patterns)
        return known

    def gpus(self, vector: Resources) -> Resources:
        """The GPU part of a resource vector."""
        out: Resources = {}
        known = self._is_gpu
        for name, amount in vector.items():
            gpu = known.get(name)
            if gpu is None:
                gpu = self.is_gpu(name)
            if gpu and amount:
                out[name] = amount
        return out

    def job_gpus(self, job: Job) -> tuple[Resources, Resources]:
        """(GPU part of the demand, GPU part of the gang minimum), shared by every job of the same
        ``job.shape`` (they depend on its tasks only, and a changed job is a new Job object): a large
        first cycle asks this of ~100,000 jobs of a few hundred shapes. Read only."""
        cached = self._job_gpus.get(job.shape_key)
        if cached is None:
            if len(self._job_gpus) >= 4096:
                self._job_gpus.clear()
            known = self._is_gpu
            asks = any(known.get(name) if name in known else self.is_gpu(name)
                       for task in job.tasks for name in task.resources)
            want = self.gpus(job.demand) if asks else {}      # job.demand is not built for CPU-only jobs
            minimum = self.gpus(job.min_demand) if want else {}
            if want and not minimum:         # minAvailable 0: at least one GPU replica must fit somewhere
                minimum = min((g for g in (self.gpus(t.resources) for t in job.tasks) if g),
                              key=lambda g: sorted(g.items()))
            cached = self._job_gpus[job.shape_key] = (want, minimum)
        return cached

    def gpu_pods(self, job: Job) -> tuple[tuple[Resources, int], ...]:
        """The GPU part of each task's pods in the gang minimum (at least one GPU pod when minAvailable
        is 0), as (per-pod GPUs, count): what must fit on single nodes. Shared by shape like ``job_gpus``."""
        return self._gpu_pods_of(job)[0]

    def _gpu_pods_of(self, job: Job) -> tuple[tuple[tuple[Resources, int], ...], Pods]:
        """``gpu_pods`` and the same pods in ``Job.min_pods``' canonical form (sorted pairs, equal shapes
        merged), which ``FleetState.fits_tasks`` memoises and answers from replica counts for one shape."""
        cached = self._gpu_pods.get(job.shape_key)
        if cached is None:
            if len(self._gpu_pods) >= 4096:
                self._gpu_pods.clear()
            pods = tuple((g, t.min_available) for t in job.tasks if t.min_available and (g := self.gpus(t.resources)))
            if not pods:
                pods = tuple((g, 1) for g in [min((g for g in (self.gpus(t.resources) for t in job.tasks) if g),
                                                  key=lambda g: sorted(g.items()), default={})] if g)
            cached = self._gpu_pods[job.shape_key] = (pods, pods_of(pods))
        return cached

    def _fits_here(self, job: Job, minimum: Resources, state: FleetState, cluster: str) -> bool:
        if not fits(minimum, state.free(cluster)):
            return False
        return state.nodes(cluster) is None or state.fits_tasks(cluster, self._gpu_pods_of(job)[1])

    def wanted_models(self, job: Job) -> list[str]:
        raw = job.labels.get(self.job_key) or job.annotations.get(self.job_key) or ""
        return [m.strip().lower() for m in raw.split(",") if m.strip()]

    def cluster_model(self, cluster: Cluster) -> str:
        for label in self.cluster_labels:
            value = cluster.labels.get(label)
            if value:
                return value.strip().lower()
        return ""

    def _clusters_by_model(self, state: FleetState) -> dict[str, list[str]]:
        ready = state.ready_clusters()
        cached_for, index = self._model_index
        if cached_for is not ready:       # ready_clusters() returns a new list whenever a cluster changes
            index = {}
            for cluster in ready:
                model = self.cluster_model(cluster)
                if model:
                    index.setdefault(model, []).append(cluster.name)
            self._model_index = (ready, index)
        return index

    def judges_fitting_clusters_only(self) -> bool:
        return True      # a filter per cluster, no placement of its own

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        # GPU quotas are per queue; the model is asked for by a label or annotation
        return (job.queue, job.shape, job.labels.get(self.job_key) or job.annotations.get(self.job_key) or "")

    def verdict_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return self._reads(job, True)    # the place stage's filter reads where the GPUs fit

    def admit_reads(self, job: Job, state: FleetState) -> Optional[tuple[Hashable, ...]]:
        return self._reads(job, bool(self.wanted_models(job)))    # where they fit: only for a model's clusters

    def _reads(self, job: Job, where: bool) -> Optional[tuple[Hashable, ...]]:
        want, minimum = self.job_gpus(job)
        if not want:
            return ()
        if self.allow_split:
            return None                   # sums per GPU model and per replica: not declared
        gpus = tuple(minimum.items())    # models read the ready clusters' labels (the engine's read)
        usage = (("allocated", job.queue),) if self.quotas else ()     # GPU quotas of this plugin's config
        return (("max", gpus), ("each", gpus), *usage) if where else (("max", gpus), *usage)

    def shared_verdict_key(self, job: Job) -> Optional[Hashable]:
        return (job.shape_key, job.labels.get(self.job_key) or job.annotations.get(self.job_key) or "")

    def admits_alike(self, queue: Queue, state: FleetState) -> bool:
        # no GPU quota of this plugin's config and no GPU capability (even of 0) on the line: ``_quota`` reads
        # nothing else of it
        return all(q.name not in self.quotas and not any(self.is_gpu(r) for r in q.capability or ())
                   for q in (queue, *state.ancestors(queue.name)))

    # -- admit --------------------------------------------------------------------------------
    @hookimpl
    def atoll_admit(self, job: Job, state: FleetState) -> Optional[Refusal]:
        want, minimum = self._job_gpus.get(job.shape_key) or self.job_gpus(job)   # lookup inlined: ~100,000 calls a cycle
        if not want:
            return None
        refusal = self._quota(job, want, state)
        if refusal is not None:
            return refusal
        if not self.allow_split and not fits(minimum, state.max_free):
            return Refusal(self._reasons.get(_ONE, minimum, state.max_free), self.name, capacity=True)
        models = self.wanted_models(job)
        if not models:
            return None
        index = self._clusters_by_model(state)
        names = [name for model in models for name in index.get(model, ())]
        if not names:
            return Refusal(f"no ready cluster has GPU model {' or '.join(models)} "
                           f"(labels {', '.join(self.cluster_labels)})", self.name)
        if self.allow_split:
            total: Resources = {}
            for name in names:
                for resource, amount in state.free(name).items():
                    if resource in minimum:
                        total[resource] = total.get(resource, 0) + amount
            if fits(minimum, total):
                return None
            return Refusal(f"needs {format_resources(minimum)} on GPU model {' or '.join(models)}; those clusters "
                           f"have {format_resources({k: total.get(k, 0) for k in minimum})} free", self.name,
                           capacity=True)
        if any(self._fits_here(job, minimum, state, name) for name in names):
            return None
        return Refusal(f"needs {format_resources(minimum)} in one cluster with GPU model {' or '.join(models)}; "
                       f"none of its {len(names)} cluster(s) has that free", self.name, capacity=True)

    def _quota(self, job: Job, want: Resources, state: FleetState) -> Optional[Refusal]:
        count = sum(want.values())
        queue = state.queues.get(job.queue)
        chain = [queue, *state.ancestors(job.queue)] if queue is not None else []
        for q in chain:
            quota = self.quotas.get(q.name)
            if quota is None and not q.capability:
                continue                  # no limit on this queue: its GPU usage is not read (once per GPU job)
            used = self.gpus(q.allocated)
            if quota is not None and sum(used.values()) + count > quota:
                return Refusal(f"queue {q.name} GPU quota {quota} would be exceeded: {sum(used.values())} in use, "
                               f"job needs {count}", self.name)
            for resource, cap in (q.capability or {}).items():
                if resource in want and used.get(resource, 0) + want[resource] > cap:
                    return Refusal(f"queue {q.name} capability {resource}={cap} would be exceeded: "
                                   f"{used.get(resource, 0)} in use, job needs {want[resource]}", self.name)
        return None

    # -- place --------------------------------------------------------------------------------
    @hookimpl
    def atoll_filter(self, job: Job, clusters: list[Cluster], state: FleetState) -> dict[str, str]:
        want, minimum = self.job_gpus(job)
        if not want:
            return {}
        models = self.wanted_models(job)
        if self.allow_split:         # a cluster is useful if it holds one replica of some GPU task
            smallest = [self.gpus(t.resources) for t in job.tasks if self.gpus(t.resources)]
        # one GPU pod shape (the common gang): its replica counts are compared inline below, not asked through
        # ``fits_tasks`` cluster by cluster (the same numbers: ``NodeView.replica_counts_for``)
        single = state.replica_counts_for(self._gpu_pods_of(job)[1]) \
            if state.any_node_shapes and not self.allow_split else None
        counts, count = single if single is not None else ({}, 0)
        out: dict[str, str] = {}
        for cluster in clusters:
            if models:
                model = self.cluster_model(cluster)
                if model not in models:
                    out[cluster.name] = (f"GPU model {model or 'unknown'}, job asks for {' or '.join(models)}")
                    continue
            free = state.free(cluster.name)
            if self.allow_split:
                if not any(fits(one, free) for one in smallest):
                    out[cluster.name] = "no room for one GPU replica"
            elif not fits(minimum, free):
                out[cluster.name] = self._reasons.get(_SHORT, minimum, free)
            elif state.nodes(cluster.name) is not None and \
                    not (counts.get(cluster.name, 0) >= count if single is not None
                         else state.fits_tasks(cluster.name, self._gpu_pods_of(job)[1])):
                out[cluster.name] = (f"{format_resources(minimum)} free in total but not on its nodes "
                                     f"(GPU pods: {', '.join(f'{n} x {format_resources(g)}' for g, n in self.gpu_pods(job))})")
        return out


PLUGINS = [GpuCapacity]

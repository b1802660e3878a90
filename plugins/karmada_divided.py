"""karmada-divided: place replicas the way plain Karmada would (the baseline to beat).

It reproduces karmada-scheduler's ``Divided`` / ``DynamicWeight: AvailableReplicas``
assignment (pkg/scheduler/core, divideReplicasByAvailableReplica), with no gang
guarantee, so a simulation of the ``karmada-fifo`` policy shows what Karmada alone
does with a batch backlog:

* Available replicas of a cluster = min over the task's requests of
  ``(allocatable − allocated − allocating) // request`` (and one pod each when the
  cluster reports ``pods``), from the cluster's *reported* resource summary. Karmada
  cannot see bindings it scheduled since the last status report (~10 s), so by default
  neither does this plugin (``countInflight: false``): within a status interval it
  places on stale numbers and over-commits members, as Karmada does. A task asking
  for nothing gets its replica count as availability (best effort).
* Clusters are sorted by available replicas (most first; ties by name, where Go's
  unstable sort is arbitrary). Each gets ``available × replicas // total``; the
  remainder goes one each to the first clusters.
* When the total available is below the replicas, Karmada fails the binding as
  Unschedulable and retries it later: the default ``whenShort: unschedulable`` keeps
  the job pending with Karmada's message (it is retried when capacity is freed).
  ``whenShort: divide`` places anyway, dividing by availability (evenly if nothing is
  available), like Duplicated/StaticWeight, which never check fit.
* Each task of a multi-task job (a Volcano Job's components) is divided on its own, so
  one gang's pods may land in several clusters and start partially: that is the point.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional, Union

from engine.core.state import FleetState
from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Placement, Refusal
from engine.plugin import Plugin
from engine.resources import PODS, Resources, clamp_nonnegative, sub
from plugins._placeutil import configure, fit_count

_UNBOUNDED = 2**31 - 1


class KarmadaDivided(Plugin):
    """Karmada's DynamicWeight (AvailableReplicas) division, with no gang guarantee."""

    name = "karmada-divided"
    stages = ("place",)
    description = "plain Karmada's Divided/DynamicWeight placement by available replicas, without gang guarantee"

    def __init__(self, config: dict[str, Any], cel: Any, where: str = "") -> None:
        where = where or f"spec.plugins.{self.name}"
        super().__init__(configure(self.schema(), config, where), cel, where)
        self.count_inflight = bool(self.config["countInflight"])
        self.when_short: str = self.config["whenShort"]
        self._reported: dict[str, tuple[Cluster, int, Resources]] = {}

    def _free(self, cluster: Cluster, state: FleetState) -> Resources:
        if self.count_inflight:
            return state.free(cluster.name)
        cached = self._reported.get(cluster.name)
        if cached is None or cached[0] is not cluster or cached[1] != cluster.generation:
            free = clamp_nonnegative(sub(sub(cluster.allocatable, cluster.allocated), cluster.allocating))
            cached = self._reported[cluster.name] = (cluster, cluster.generation, free)
        return cached[2]

    def verdict_key(self, job: Job) -> Optional[Hashable]:
        return job.shape

    @hookimpl
    def atoll_place(self, job: Job, clusters: list[Cluster], state: FleetState) -> Union[Placement, Refusal, None]:
        if not clusters:
            return None
        frees = [(c, self._free(c, state)) for c in clusters]
        placement: Placement = {}
        for task in job.tasks:
            if task.replicas <= 0:
                continue
            best_effort = not any(v > 0 for v in task.resources.values())
            with_pod = task.resources if PODS in task.resources else {**task.resources, PODS: 1}
            available = []
            for cluster, free in frees:
                if best_effort:
                    available.append((cluster.name, task.replicas))
                else:
                    request = with_pod if PODS in cluster.allocatable else task.resources
                    available.append((cluster.name, fit_count(request, free, _UNBOUNDED)))
            available.sort(key=lambda item: (-item[1], item[0]))
            total = sum(n for _, n in available)
            if total < task.replicas:
                if self.when_short == "unschedulable":
                    return Refusal(f"Unschedulable: clusters resources are not enough to schedule task {task.name}: "
                                   f"max {total} replicas are supported, {task.replicas} needed "
                                   "(karmada-scheduler DynamicWeight by AvailableReplicas)", self.name, capacity=True)
                if total == 0:
                    available = [(name, 1) for name, _ in available]
            for name, n in divide_by_available(available, task.replicas).items():
                if n:
                    placement.setdefault(name, {})[task.name] = n
        return placement or {clusters[0].name: {}}


def divide_by_available(available: list[tuple[str, int]], replicas: int) -> dict[str, int]:
    """Karmada's divideReplicasByAvailableReplica + divideRemainingReplicas on a sorted list."""
    total = sum(n for _, n in available)
    desired = {name: (n * replicas // total if total else 0) for name, n in available}
    remaining = replicas - sum(desired.values())
    names = [name for name, _ in available]
    if remaining > 0 and names:
        if remaining < len(names):
            for name in names[:remaining]:
                desired[name] += 1
        else:
            avg, residue = divmod(remaining, len(names))
            for i, name in enumerate(names):
                desired[name] += avg + (1 if i < residue else 0)
    return desired


PLUGINS = [KarmadaDivided]

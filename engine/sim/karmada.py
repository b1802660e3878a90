"""karmada-scheduler in the simulator (gate mode): where Karmada itself puts an admitted job.

In ``placementMode: gate`` Atoll only lifts the binding's scheduling suspension; karmada-scheduler then
places the workload by its PropagationPolicy, from the Cluster objects as last reported (it does not
count its own assignments since the last status report: ``SchedulingOvercommitProtection`` is off by
default). This module reproduces that for the replica scheduling types batch jobs use:

* ``aggregated`` (Divided, ``replicaDivisionPreference: Aggregated``): clusters sorted by available
  replicas (most first, ties by name); the fewest first clusters whose availability covers the
  replicas; those divided by availability (``divideReplicasByAvailableReplica``).
* ``dynamic-weight`` (Divided, Weighted by ``AvailableReplicas``): all clusters, divided by availability.
* ``duplicated``: every ready cluster gets every replica (no fit check).

A task whose replicas exceed the clusters' total availability is Unschedulable (None): Karmada
retries the binding later; the simulator retries at every status report.

Available replicas come from the **general estimator** of Karmada v1.18+ (the e2e fleet's version,
``pkg/estimator/client/general.go``): ``allowedPods = allocatable.pods - allocated.pods -
allocating.pods`` (<= 0: none; only when the cluster reports ``pods``); then, if the cluster has
resource models, first-fit onto ``count`` virtual nodes per grade with the grade's ``min`` vector and
110 pods each (``nodefit.max_replicas``) -- a requested resource the models do not grade gives 0
(the v1.18 regression described in docs/plugins-placement.md) and pending pods are not subtracted;
without models, ``min((allocatable - allocated - allocating) // request)``. The accurate estimator
(karmada-scheduler-estimator) is not simulated. Each task of a multi-task job is placed on its own.
"""

from __future__ import annotations

from typing import Mapping, Optional

from engine.core.nodefit import UNBOUNDED, max_replicas
from engine.model import Cluster, Placement, Task
from engine.resources import PODS
from plugins.karmada_divided import divide_by_available

PODS_PER_VIRTUAL_NODE = 110


def available_replicas(cluster: Cluster, per_pod: Mapping[str, int]) -> int:
    """Karmada's general estimator (v1.18+) for one cluster and one pod shape."""
    allowed = UNBOUNDED
    if PODS in cluster.allocatable:
        allowed = cluster.allocatable[PODS] - cluster.allocated.get(PODS, 0) - cluster.allocating.get(PODS, 0)
        if allowed <= 0:
            return 0
    request = {k: v for k, v in per_pod.items() if v > 0 and k != PODS}
    if not request:
        return allowed
    shapes = cluster.node_shapes
    if shapes is not None:
        if any(name not in shapes.resources for name in request):
            return 0                           # v1.18+: an unmodelled resource has virtual capacity 0
        return min(allowed, max_replicas(shapes, request, PODS_PER_VIRTUAL_NODE))
    best = allowed
    for name, amount in request.items():
        have = cluster.allocatable.get(name, 0) - cluster.allocated.get(name, 0) - cluster.allocating.get(name, 0)
        best = min(best, max(0, have) // amount)
    return best


def karmada_place(tasks: list[Task], clusters: list[Cluster], propagation: str) -> Optional[Placement]:
    """karmada-scheduler's placement of the job over ``clusters`` (ready ones, as last reported), or
    None when it would fail the binding as Unschedulable."""
    ready = sorted((c for c in clusters if c.ready), key=lambda c: c.name)
    if not ready:
        return None
    placement: Placement = {}
    for task in tasks:
        if task.replicas <= 0:
            continue
        if propagation == "duplicated":
            for c in ready:
                placement.setdefault(c.name, {})[task.name] = task.replicas
            continue
        available = sorted(((c.name, available_replicas(c, task.resources)) for c in ready),
                           key=lambda item: (-item[1], item[0]))
        if sum(n for _, n in available) < task.replicas:
            return None
        if propagation == "aggregated":
            chosen, covered = [], 0
            for name, n in available:
                if covered >= task.replicas or n <= 0:
                    break
                chosen.append((name, n))
                covered += n
            available = chosen
        for name, n in divide_by_available(available, task.replicas).items():
            if n:
                placement.setdefault(name, {})[task.name] = n
    return placement

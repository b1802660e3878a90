"""Pods no node of their member can host, seen from the member pod watches. Pure (``now`` passed in).

Why member pods: Karmada does not surface "unschedulable" anywhere the controller already watches. For a
batch/v1 Job, the status Karmada reflects from a member (``reflectJobStatus``: active, succeeded, failed,
conditions, startTime, completionTime) and aggregates into the binding's ``aggregatedStatus`` and the template
counts a Pending pod as ``active``, exactly like a running one (``ready`` is dropped); no Job condition says
Unschedulable; Work ``manifestStatuses`` carry the same reflected status. A Deployment only shows
``unavailableReplicas`` (a crash loop or a slow image pull look the same), a Volcano Job ``pending``. The pod's
``PodScheduled=False, reason Unschedulable`` condition, set by the member's scheduler, is the one precise signal,
and its message says why ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu").

The runner watches, per member and through Karmada's cluster proxy, only pods not bound to a node
(``fieldSelector=spec.nodeName=``): a pod leaves the stream the moment it is bound, so the cost is one watch per
member and memory for the unbound pods only. A pod is *overdue* when it has stayed Unschedulable, without
interruption, for ``grace`` seconds as this controller saw it (its own clock, so member clock skew does not
matter). The controller then fails the job on that member (``FailureKind.UNSCHEDULABLE``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from engine.kube.translate import meta

Obj = Mapping[str, Any]
WorkloadKey = tuple[str, str]
"""(apiVersion/Kind, namespace/name) of a resource template, as the controller keys templates."""


@dataclass(frozen=True)
class StuckPod:
    cluster: str
    workload: WorkloadKey
    pod: str                   # namespace/name in the member
    since: float               # when this controller first saw it Unschedulable (its clock)
    message: str               # the member scheduler's reason


def workload_of(pod: Obj) -> Optional[WorkloadKey]:
    """The template a pod belongs to, from its controller ownerReference: a batch Job or a Volcano Job owns its
    pods directly; a Deployment owns a ReplicaSet named ``<deployment>-<pod-template-hash>``."""
    m = meta(pod)
    ns = str(m.get("namespace") or "")
    for ref in m.get("ownerReferences") or ():
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        api, kind, name = str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ReplicaSet" and api == "apps/v1":
            labels = m.get("labels") if isinstance(m.get("labels"), Mapping) else {}
            suffix = f"-{(labels or {}).get('pod-template-hash', '')}"
            if len(suffix) > 1 and name.endswith(suffix):
                return "apps/v1/Deployment", f"{ns}/{name[:-len(suffix)]}"
            return None
        return f"{api}/{kind}", f"{ns}/{name}"
    return None


def unschedulable(pod: Obj) -> Optional[str]:
    """The scheduler's message when the pod is unbound, not being deleted, and PodScheduled=False/Unschedulable."""
    m = meta(pod)
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    if m.get("deletionTimestamp") or (spec or {}).get("nodeName"):
        return None
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    for cond in (status or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled":
            if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                return str(cond.get("message") or "Unschedulable")
            return None
    return None


class StuckPods:
    """Unschedulable pods of all members, and which of them have waited ``grace`` seconds."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.pods: dict[tuple[str, str], StuckPod] = {}        # (cluster, pod uid) -> pod
        self._due: list[tuple[float, str, str]] = []           # (deadline, cluster, uid), lazily cleaned

    def on_pod(self, cluster: str, new: Optional[Obj], old: Optional[Obj], now: float) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        m = meta(obj)
        key = (cluster, str(m.get("uid") or f"{m.get('namespace')}/{m.get('name')}"))
        message = unschedulable(new) if new is not None else None
        workload = workload_of(obj) if message is not None else None
        if message is None or workload is None:
            self.pods.pop(key, None)
            return
        known = self.pods.get(key)
        since = known.since if known is not None else now
        self.pods[key] = StuckPod(cluster, workload, f"{m.get('namespace')}/{m.get('name')}", since, message)
        if known is None:
            heapq.heappush(self._due, (since + self.grace, *key))

    def forget_cluster(self, cluster: str) -> None:
        for key in [k for k in self.pods if k[0] == cluster]:
            del self.pods[key]

    def overdue(self, now: float) -> list[StuckPod]:
        """Pods Unschedulable for at least ``grace`` seconds, each reported once (until it is seen again after
        leaving: a pod that stays stuck is the caller's to act on, once)."""
        out = []
        while self._due and self._due[0][0] <= now:
            _, cluster, uid = heapq.heappop(self._due)
            pod = self.pods.get((cluster, uid))
            if pod is not None and pod.since + self.grace <= now:
                out.append(pod)
        return out

    def next_deadline(self) -> Optional[float]:
        return self._due[0][0] if self._due else None

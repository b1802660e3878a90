"""Real-shaped Kubernetes objects (as the API returns them) for controller tests."""

from __future__ import annotations

from typing import Any, Optional

Obj = dict[str, Any]


def pod(cpu: str = "1", memory: str = "1Gi", gpu: Optional[str] = None, pc: str = "") -> Obj:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpu:
        limits["nvidia.com/gpu"] = gpu
    spec: Obj = {"containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": requests, **({"limits": limits} if limits else {})}}]}
    if pc:
        spec["priorityClassName"] = pc
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def vcjob(name: str, ns: str = "team-a", queue: str = "default", tasks: Optional[list[tuple[str, int, Optional[int], str]]] = None,
          min_available: Optional[int] = None, pc: str = "", rv: str = "1") -> Obj:
    tasks = tasks or [("worker", 2, None, "1")]
    spec: Obj = {"queue": queue, "schedulerName": "volcano",
                 "tasks": [{"name": n, "replicas": r, **({"minAvailable": m} if m is not None else {}),
                            "template": pod(cpu)} for n, r, m, cpu in tasks]}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if pc:
        spec["priorityClassName"] = pc
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": rv}, "spec": spec}


def batch_job(name: str, ns: str = "team-a", parallelism: int = 2, cpu: str = "1", labels: Optional[dict[str, str]] = None,
              pc: str = "", status: Optional[Obj] = None, rv: str = "1") -> Obj:
    obj: Obj = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": rv,
                             "labels": labels or {}},
                "spec": {"parallelism": parallelism, "completions": parallelism, "template": pod(cpu, pc=pc)}}
    if status is not None:
        obj["status"] = status
    return obj


def deployment(name: str, ns: str = "team-a", replicas: int = 3, cpu: str = "500m", gpu: Optional[str] = None,
               annotations: Optional[dict[str, str]] = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "1",
                         "annotations": annotations or {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "x"}}, "template": pod(cpu, gpu=gpu)}}


def binding(template: Obj, paused: bool = True, clusters: Optional[list[str]] = None, created: str = "2026-11-22T21:00:00Z",
            annotations: Optional[dict[str, str]] = None, rv: str = "10", conditions: Optional[list[Obj]] = None,
            scheduler: str = "default-scheduler") -> Obj:
    m = template["metadata"]
    name = f"{m['name']}-{template['kind'].lower()}"
    spec: Obj = {"resource": {"apiVersion": template["apiVersion"], "kind": template["kind"], "name": m["name"],
                              "namespace": m["namespace"], "uid": m["uid"]},
                 "replicas": 0, "schedulerName": scheduler, "suspension": {"dispatching": False}}
    if paused:
        spec["suspension"]["scheduling"] = True
    if clusters:
        spec["clusters"] = [{"name": c, "replicas": 1} for c in clusters]
    return {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": name, "namespace": m["namespace"], "uid": f"rb-{name}", "resourceVersion": rv,
                         "creationTimestamp": created, "annotations": dict(annotations or {})},
            "spec": spec, "status": {"conditions": conditions or []}}


def cluster(name: str, cpu: str = "64", memory: str = "512Gi", gpu: str = "16", ready: bool = True,
            allocated_cpu: str = "0", labels: Optional[dict[str, str]] = None) -> Obj:
    return {"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "1"},
            "spec": {"syncMode": "Push"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "reason": "ClusterReady" if ready else "ClusterNotReachable"}],
                       "resourceSummary": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "220",
                                                           "nvidia.com/gpu": gpu},
                                           "allocated": {"cpu": allocated_cpu, "memory": "0", "pods": "0"},
                                           "allocating": {"cpu": "0"}}}}


def queue(name: str, weight: int = 1, priority: Optional[int] = None, capability: Optional[dict[str, str]] = None,
          state: str = "Open", parent: Optional[str] = None, guarantee: Optional[dict[str, str]] = None) -> Obj:
    spec: Obj = {"weight": weight, "reclaimable": True}
    if priority is not None:
        spec["priority"] = priority
    if capability:
        spec["capability"] = capability
    if parent:
        spec["parent"] = parent
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec, "status": {"state": state}}


def priority_class(name: str, value: int, default: bool = False) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": default}


MAX_INT64 = "9223372036854775807"


def resource_models(edges: dict[str, list[str]]) -> list[Obj]:
    """``spec.resourceModels`` as Karmada stores it: grade i spans [edges[i], edges[i+1]) per resource, the last
    grade open-ended (max = MaxInt64), every grade listing the same resources in the same order."""
    grades = len(next(iter(edges.values())))
    return [{"grade": i, "ranges": [{"name": name, "min": cuts[i],
                                     "max": cuts[i + 1] if i + 1 < grades else MAX_INT64}
                                    for name, cuts in edges.items()]}
            for i in range(grades)]


def modeled_cluster(name: str, models: list[Obj], counts: list[int], gpu: str = "32", nodes: Optional[int] = None,
                    ready: bool = True) -> Obj:
    """A Cluster with spec.resourceModels and the status Karmada's cluster status controller writes."""
    obj = cluster(name, gpu=gpu, ready=ready)
    obj["spec"]["resourceModels"] = models
    obj["status"]["resourceSummary"]["allocatableModelings"] = [
        {"grade": i, "count": c} for i, c in enumerate(counts)]
    total = sum(counts) if nodes is None else nodes
    obj["status"]["nodeSummary"] = {"totalNum": total, "readyNum": total}
    return obj


def member_pod(name: str, owner: Obj, ns: str = "team-a", unschedulable: Optional[str] = None,
               node: Optional[str] = None, uid: Optional[str] = None, rs_hash: str = "") -> Obj:
    """A pod as a member's API returns it: owned by its workload (a Deployment's pod by its ReplicaSet), with
    PodScheduled=False/Unschedulable as kube-scheduler writes it when no node fits."""
    kind, api, owner_name = owner["kind"], owner["apiVersion"], owner["metadata"]["name"]
    labels: dict[str, str] = {}
    if kind == "Deployment":
        kind, owner_name, labels = "ReplicaSet", f"{owner_name}-{rs_hash}", {"pod-template-hash": rs_hash}
    pod: Obj = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "labels": labels,
                             "resourceVersion": "5", "ownerReferences": [
                                 {"apiVersion": api, "kind": kind, "name": owner_name, "uid": "x",
                                  "controller": True, "blockOwnerDeletion": True}]},
                "spec": {"containers": [{"name": "w", "image": "x"}], **({"nodeName": node} if node else {})},
                "status": {"phase": "Pending"}}
    if unschedulable is not None:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": unschedulable, "lastTransitionTime": "2026-11-23T14:00:00Z"}]
    return pod

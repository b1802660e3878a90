"""A Karmada Cluster and a Volcano Queue -> the engine's Cluster and Queue. Pure functions; anything malformed
raises ``InputError`` naming the object and field."""

from __future__ import annotations

from typing import Mapping, Optional

from engine.errors import InputError
from engine.kube.objects import Obj, _int, _items, _labels, _signed_int, describe, meta
from engine.kube.resource_models import node_shapes
from engine.model import Cluster, Queue
from engine.resources import parse_resources


def cluster_from_obj(obj: Obj, now: float, warnings: Optional[list[str]] = None) -> Cluster:
    """A Karmada Cluster: resourceSummary allocatable/allocated/allocating, Ready condition, labels, and the
    node view from its resource models (engine/kube/resource_models.py). A resource model Atoll cannot use
    leaves ``node_shapes`` None (summed totals) and appends a one-line reason to ``warnings``.

    A Cluster being deleted (deletionTimestamp) is not ready whatever its condition says: Karmada removes it
    only once no binding lists it in spec.clusters, and bindings Atoll placed (bind mode) are moved by Atoll
    alone, so it must requeue them and place nothing new there, or the deletion waits for ever."""
    where = describe({"kind": "Cluster", **obj})
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    summary = status.get("resourceSummary") or {}
    if not isinstance(summary, Mapping):
        raise InputError("status.resourceSummary must be a mapping", where)
    ready = False
    conditions = status.get("conditions")
    if conditions is not None and not isinstance(conditions, list):
        raise InputError(f"status.conditions must be a list, got {type(conditions).__name__}", where)
    for cond in _items(conditions):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    if meta(obj).get("deletionTimestamp"):
        ready = False
    shapes, problem = node_shapes(obj, where)
    if problem is not None and warnings is not None:
        warnings.append(problem)
    return Cluster(
        name=str(meta(obj).get("name", "")), labels=_labels(obj), ready=ready, node_shapes=shapes,
        allocatable=parse_resources(summary.get("allocatable"), f"{where}: status.resourceSummary.allocatable"),
        allocated=parse_resources(summary.get("allocated"), f"{where}: status.resourceSummary.allocated"),
        allocating=parse_resources(summary.get("allocating"), f"{where}: status.resourceSummary.allocating"),
        status_time=now,
    )


# -- queues --------------------------------------------------------------------------------------------
def queue_from_obj(obj: Obj) -> Queue:
    """A Volcano Queue (scheduling.volcano.sh/v1beta1). Closed/Closing queues admit nothing."""
    where = describe({"kind": "Queue", **obj})
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError("spec must be a mapping", where)
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    state = str(status.get("state") or spec.get("state") or "Open")
    guarantee = spec.get("guarantee") or {}
    if not isinstance(guarantee, Mapping):
        raise InputError("spec.guarantee must be a mapping", where)
    capability = spec.get("capability")
    deserved = spec.get("deserved")
    parent = spec.get("parent")
    weight = _int(spec.get("weight"), f"{where}: spec.weight", 1)
    return Queue(
        name=str(meta(obj).get("name", "")), parent=str(parent) if parent and parent != "root" else None,
        weight=max(weight, 1), priority=_signed_int(spec.get("priority"), f"{where}: spec.priority"),
        open=state not in ("Closed", "Closing"),
        capability=parse_resources(capability, f"{where}: spec.capability", keep_zero=True) if capability else None,
        guarantee=parse_resources(guarantee.get("resource"), f"{where}: spec.guarantee.resource"),
        deserved=parse_resources(deserved, f"{where}: spec.deserved", keep_zero=True) if deserved else None,
        labels=_labels(obj), reclaimable=spec.get("reclaimable") is not False,    # Volcano: nil means true
    )

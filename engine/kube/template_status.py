"""A workload's progress from its template's status (aggregated by Karmada from the members) and a member's
failure from its binding's aggregatedStatus: started, finished, failed."""

from __future__ import annotations

from typing import Mapping, Optional

from engine.kube.objects import BATCH_JOB, DEPLOYMENT, VOLCANO_JOB, Obj, _items, template_gvk


def template_outcome(obj: Obj) -> Optional[bool]:
    """True when the workload finished successfully, False when it failed, None while it runs."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    gvk = template_gvk(obj)
    if gvk == VOLCANO_JOB:
        phase = (status.get("state") or {}).get("phase") if isinstance(status.get("state"), Mapping) else None
        if phase == "Completed":
            return True
        if phase in ("Failed", "Aborted", "Terminated"):
            return False
        return None
    if gvk == BATCH_JOB:
        for cond in _items(status.get("conditions")):
            if isinstance(cond, Mapping) and cond.get("status") == "True":
                if cond.get("type") == "Complete":
                    return True
                if cond.get("type") == "Failed":
                    return False
    return None


def template_started(obj: Obj) -> bool:
    """Some pod of the workload exists in a member (Karmada aggregates member status into the template)."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return False
    gvk = template_gvk(obj)
    keys: tuple[str, ...]
    if gvk == BATCH_JOB:
        keys = ("active", "succeeded", "failed", "ready")
    elif gvk == DEPLOYMENT:
        keys = ("replicas",)
    else:
        keys = ("running", "pending", "succeeded", "failed")
    return any(isinstance(status.get(k), int) and status.get(k, 0) > 0 for k in keys)



def member_failure(binding: Obj) -> Optional[tuple[str, str]]:
    """(cluster, marker) of a member whose copy of the workload failed, from the binding's aggregatedStatus
    (Karmada reflects each member's Job conditions there; ``FailureTarget`` counts: a Job past its deadline may
    sit in it while its pods terminate). The marker identifies this failure so it is acted on once."""
    status = binding.get("status")
    items = status.get("aggregatedStatus") if isinstance(status, Mapping) else None
    for item in _items(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("status"), Mapping):
            continue
        for cond in _items(item["status"].get("conditions")):
            if isinstance(cond, Mapping) and cond.get("type") in ("Failed", "FailureTarget") \
                    and cond.get("status") == "True":
                cluster = str(item.get("clusterName", ""))
                return cluster, f"{cluster}@{cond.get('lastTransitionTime', '')}"
    return None

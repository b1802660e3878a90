"""Reading a (Cluster)ResourceBinding dict: its address, pause state, template, conditions. Pure helpers; and
``contained``, which keeps one binding's trouble its own."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Optional

from engine.kube.plan import SCHEDULER_NAME, BindingRef, binding_clusters
from engine.kube.translate import meta


def binding_ref(obj: Mapping[str, Any]) -> BindingRef:
    m = meta(obj)
    return BindingRef(str(m.get("name", "")), str(m.get("namespace") or ""), str(m.get("uid") or ""))


def is_paused(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    suspension = spec.get("suspension") if isinstance(spec, Mapping) else None
    return isinstance(suspension, Mapping) and suspension.get("scheduling") is True


def addressed_unplaced(obj: Mapping[str, Any]) -> bool:
    """Addressed to ``schedulerName: atoll`` (bind mode) and not placed: waiting for Atoll even when not paused.

    karmada-scheduler ignores these and, without spec.clusters, Karmada's binding controller dispatches nothing, so
    one the webhook did not pause (created while it was down, failurePolicy Ignore) still waits for Atoll."""
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and spec.get("schedulerName") == SCHEDULER_NAME and not binding_clusters(obj)


def template_key(binding: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(apiVersion/Kind, namespace/name) of the template a binding points to."""
    spec = binding.get("spec")
    res = spec.get("resource") if isinstance(spec, Mapping) else None
    if not isinstance(res, Mapping) or not res.get("name"):
        return None
    ns = res.get("namespace")
    return f"{res.get('apiVersion', '')}/{res.get('kind', '')}", f"{ns}/{res['name']}" if ns else str(res["name"])


def scheduled_condition(binding: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    status = binding.get("status")
    for cond in (status.get("conditions") or ()) if isinstance(status, Mapping) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "Scheduled":
            return cond
    return None

def failure_marker(template: Mapping[str, Any]) -> str:
    """Identifies one failure of a workload, so a stale Failed status is not acted on twice."""
    status = template.get("status") if isinstance(template.get("status"), Mapping) else {}
    for cond in (status or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Failed":
            return f"Failed@{cond.get('lastTransitionTime', '')}"
    state = (status or {}).get("state")
    if isinstance(state, Mapping):
        return f"{state.get('phase', '')}@{state.get('lastTransitionTime', '')}"
    return "failed"


@contextmanager
def contained(key: str, what: str) -> Iterator[None]:
    """Run one binding's part of a controller step: an error there (an object shape nobody foresaw, a bug) is
    logged with the binding's key and the step goes on with the others. A forged annotation once raised out of
    ``Controller.step`` and stopped scheduling for the whole fleet, again after every restart."""
    try:
        yield
    except Exception:
        logging.getLogger("atoll.controller").exception("%s: %s failed; the other bindings go on", key, what)

"""What the controller asks the API to do, as plain data: merge patches on bindings and Events. Pure.

Why one merge patch per decision: resuming and annotating in the same request is atomic, so after a crash a
binding is either still paused (and re-queued on restart) or resumed *and* marked admitted — never admitted
twice. A merge patch touches only the fields it names (a JSON patch on /spec/suspension would drop
``dispatching`` copied from the PropagationPolicy), and carries no resourceVersion, so it cannot conflict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

from engine.model import Job, Placement

MERGE_PATCH = "application/merge-patch+json"

QUEUE_ANNOTATION = "atoll.dev/queue"
ADMITTED_ANNOTATION = "atoll.dev/admitted-at"
PENDING_ANNOTATION = "atoll.dev/pending-reason"
CLUSTERS_ANNOTATION = "atoll.dev/clusters"
PREEMPTED_BY_ANNOTATION = "atoll.dev/preempted-by"      # the job that last evicted this one (history)
EVICTING_ANNOTATION = "atoll.dev/evicting-since"        # eviction intent: present until its Works are gone
PREEMPTIONS_ANNOTATION = "atoll.dev/preemptions"        # times evicted (the policy's limit survives restarts)
SCHEDULER_NAME = "atoll"
MAX_ANNOTATION = 1000


MAX_STAMP = 253402300799.0
"""9999-12-31T23:59:59Z: the last second RFC 3339 (and Python's datetime) can write."""


def stamp(ts: float) -> str:
    """RFC 3339 UTC with microseconds (clamped to 1970 .. 9999: never an error, whatever time it is given)."""
    return datetime.fromtimestamp(min(max(ts, 0.0), MAX_STAMP), timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stamp_seconds(ts: float) -> str:
    """metav1.Time form (whole seconds), for fields Karmada parses as Time."""
    return stamp(ts)[:19] + "Z"


def parse_stamp(value: Any) -> Optional[float]:
    """RFC 3339 (``...Z``, optional fraction) -> Unix seconds; None when absent, malformed or outside 1970 .. 9999
    (``0001-01-01T00:00:00+01:00`` in an annotation once stopped the controller: ``stamp`` could not write it
    back). Annotations are data anyone with write access to a binding can set: callers bound them by ``now`` or by
    creationTimestamp where that matters (``Controller._submit_time``)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        ts = datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError):
        return None
    return ts if 0.0 <= ts <= MAX_STAMP else None


@dataclass(frozen=True)
class BindingRef:
    """Enough to address a (Cluster)ResourceBinding and to name it in an Event."""

    name: str
    namespace: str = ""              # "" for a ClusterResourceBinding
    uid: str = ""

    @property
    def kind(self) -> str:
        return "ResourceBinding" if self.namespace else "ClusterResourceBinding"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass
class Patch:
    """A merge patch (content type application/merge-patch+json) on one binding."""

    ref: BindingRef
    body: dict[str, Any]
    why: str = ""                    # admit | pending | requeue | giveup | bind | bind-status | evict | evicted
    content_type: str = MERGE_PATCH
    subresource: str = ""            # "status": the status subresource


@dataclass
class Event:
    """A core/v1 Event about ``involved`` (apiVersion, kind, name, namespace, uid)."""

    involved: dict[str, str]
    reason: str
    message: str
    type: str = "Normal"
    extra: dict[str, Any] = field(default_factory=dict)


def _short(text: str) -> str:
    return text if len(text) <= MAX_ANNOTATION else text[:MAX_ANNOTATION - 3] + "..."


def resume_patch(queue: str, admitted_at: float, reschedule: bool = False) -> dict[str, Any]:
    """Gate mode: let karmada-scheduler place the binding, and record why and when."""
    spec: dict[str, Any] = {"suspension": {"scheduling": False}}
    if reschedule:      # a requeued job: make karmada-scheduler place it afresh, not keep the old clusters
        spec["rescheduleTriggeredAt"] = stamp_seconds(math.ceil(admitted_at))
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, ADMITTED_ANNOTATION: stamp(admitted_at),
                                         PENDING_ANNOTATION: None}},
            "spec": spec}


def bind_patch(queue: str, admitted_at: float, placement: Placement) -> dict[str, Any]:
    """Bind mode (schedulerName: atoll): write the engine's placement as spec.clusters ourselves."""
    clusters = [{"name": c, "replicas": sum(p.values())} for c, p in sorted(placement.items())]
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, ADMITTED_ANNOTATION: stamp(admitted_at),
                                         PENDING_ANNOTATION: None,
                                         CLUSTERS_ANNOTATION: ",".join(sorted(placement))}},
            "spec": {"clusters": clusters, "suspension": {"scheduling": False}}}


def bind_status_patch(generation: int, at: float, conditions: Any = ()) -> dict[str, Any]:
    """Status of a binding bind mode placed: Scheduled=True, observed generation (status subresource).

    A merge patch replaces the whole conditions list, so the others (FullyApplied, written by Karmada's binding
    controller) are carried over from ``conditions``: the binding as the spec patch returned it."""
    scheduled = {"type": "Scheduled", "status": "True", "reason": "Success",
                 "message": "Binding has been scheduled successfully by atoll.", "lastTransitionTime": stamp_seconds(at)}
    kept = [c for c in conditions or () if isinstance(c, Mapping) and c.get("type") != "Scheduled"]
    return {"status": {"schedulerObservedGeneration": generation, "lastScheduledTime": stamp_seconds(at),
                       "conditions": [*kept, scheduled]}}


def pending_patch(queue: str, reason: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, PENDING_ANNOTATION: _short(reason)}}}


def requeue_patch(queue: str, reason: str) -> dict[str, Any]:
    """Pause again after a failure and drop the old placement: the job waits (backoff) for a new admission.

    Clearing spec.clusters matters: karmada-scheduler tolerates a NoSchedule taint (e.g. not-ready) on a cluster
    the binding is already placed on, even on an explicit reschedule, so a lost cluster would be chosen again;
    and a failed workload's Work is withdrawn, so the re-admitted one starts afresh."""
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, PENDING_ANNOTATION: _short(reason),
                                         ADMITTED_ANNOTATION: None}},
            "spec": {"suspension": {"scheduling": True}, "clusters": None}}


def evict_patch(queue: str, preemptor: str, reason: str, at: float, preemptions: int) -> dict[str, Any]:
    """Preempted: record the intent and withdraw the workload from every member, in one atomic request.

    Pausing and clearing spec.clusters (gate and bind mode alike) makes Karmada's binding controller delete the
    binding's Works and the execution controller delete the member objects (and so their pods); the paused
    binding is not placed again by karmada-scheduler. The annotations make the eviction survive a restart: a
    binding carrying ``evicting-since`` is adopted as evicting (holding its capacity) until its Works are gone."""
    why = f"preempted by {preemptor} ({reason}) at {stamp(at)}; its workload is being removed from its members"
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, PENDING_ANNOTATION: _short(why),
                                         ADMITTED_ANNOTATION: None, PREEMPTED_BY_ANNOTATION: preemptor,
                                         EVICTING_ANNOTATION: stamp(at), PREEMPTIONS_ANNOTATION: str(preemptions)}},
            "spec": {"suspension": {"scheduling": True}, "clusters": None}}


def evicted_patch(queue: str, reason: str) -> dict[str, Any]:
    """The victim's Works are gone: the intent is done, it waits in its queue like any paused job."""
    return {"metadata": {"annotations": {QUEUE_ANNOTATION: queue, PENDING_ANNOTATION: _short(reason),
                                         EVICTING_ANNOTATION: None}}}


def binding_involved(ref: BindingRef) -> dict[str, str]:
    out = {"apiVersion": "work.karmada.io/v1alpha2", "kind": ref.kind, "name": ref.name, "uid": ref.uid}
    if ref.namespace:
        out["namespace"] = ref.namespace
    return out


def event_body(ev: Event, now: float, component: str = "atoll") -> dict[str, Any]:
    """The core/v1 Event object for ``ev`` (namespace of the object, or default for cluster-scoped ones)."""
    ns = ev.involved.get("namespace") or "default"
    ts = stamp_seconds(now)
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{ev.involved.get('name', 'atoll')}.", "namespace": ns},
            "involvedObject": dict(ev.involved), "reason": ev.reason, "message": _short(ev.message),
            "type": ev.type, "source": {"component": component}, "reportingComponent": component,
            "reportingInstance": component, "firstTimestamp": ts, "lastTimestamp": ts, "count": 1}


def binding_clusters(binding: Mapping[str, Any]) -> list[str]:
    """Cluster names in spec.clusters (where Karmada, or bind mode, placed the binding)."""
    spec = binding.get("spec")
    if not isinstance(spec, Mapping):
        return []
    return [str(t["name"]) for t in spec.get("clusters") or () if isinstance(t, Mapping) and t.get("name")]


def placement_on(clusters: list[str], job: Job) -> Placement:
    """A placement that puts the whole job on the first of ``clusters`` (for jobs adopted after a restart,
    whose real split Karmada owns) and names the others, so a lost cluster is still noticed."""
    out: Placement = {c: {} for c in clusters}
    if clusters:
        out[clusters[0]] = {t.name: t.replicas for t in job.tasks if t.replicas}
    return out

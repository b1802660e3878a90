"""Kubernetes objects (plain dicts as the API returns them) -> the engine's model. Pure functions.

Why from the *template*: Karmada's Volcano Job interpreter defines no replica interpreter, so a Volcano Job's
binding says replicas 0 and no requirements. The demand of every task (replicas x pod requests) is read from
the resource template itself. Anything malformed raises ``InputError`` naming the object and field, so the
controller can log it and keep the job visible instead of crashing or losing it.

The translation is split by what it reads: ``objects`` (metadata, counts, kinds), ``fleet_objects`` (Cluster,
Queue), ``demand`` (tasks and pod requests), ``priority`` (PriorityClasses), ``template_status`` (started,
finished, failed). This module builds the Job and re-exports the rest, so ``engine.kube.translate`` stays the
one import for callers.
"""

from __future__ import annotations

from typing import Any, Mapping

from engine.kube.demand import pod_requests, pod_resources, tasks_from_template
from engine.kube.fleet_objects import cluster_from_obj, queue_from_obj
from engine.kube.objects import (BATCH_JOB, DEPLOYMENT, INT32_MAX, INT32_MIN, VOLCANO_JOB, Obj, _labels, describe,
                                 meta, object_key, template_gvk)
from engine.kube.priority import HIGHEST_USER_PRIORITY, PriorityClasses, priority_class_of, priority_value_problem
from engine.kube.template_status import member_failure, template_outcome, template_started
from engine.model import Job

QUEUE_LABEL = "volcano.sh/queue-name"
ATOLL_QUEUE = "atoll.dev/queue"
DEFAULT_QUEUE = "default"

__all__ = ["ATOLL_QUEUE", "BATCH_JOB", "DEFAULT_QUEUE", "DEPLOYMENT", "HIGHEST_USER_PRIORITY", "INT32_MAX", "INT32_MIN",
           "QUEUE_LABEL", "VOLCANO_JOB", "Obj", "PriorityClasses", "cluster_from_obj", "describe", "job_fingerprint",
           "job_from_template", "member_failure", "meta", "object_key", "pod_requests", "pod_resources",
           "priority_class_of", "priority_value_problem", "queue_from_obj", "queue_of", "tasks_from_template",
           "template_gvk", "template_outcome", "template_started"]


# -- queue and Job -------------------------------------------------------------------------------------
def queue_of(obj: Obj) -> str:
    """Volcano Job spec.queue, else label/annotation volcano.sh/queue-name or atoll.dev/queue, else default."""
    if template_gvk(obj) == VOLCANO_JOB:
        spec = obj.get("spec")
        if isinstance(spec, Mapping) and spec.get("queue"):
            return str(spec["queue"])
    labels, annotations = _labels(obj), _labels(obj, "annotations")
    for key in (QUEUE_LABEL, ATOLL_QUEUE):
        value = labels.get(key) or annotations.get(key)
        if value:
            return value
    return DEFAULT_QUEUE


def job_from_template(job_id: str, template: Obj, classes: PriorityClasses, submit_time: float) -> Job:
    """The engine's Job for one binding, all of it read from the resource template."""
    m = meta(template)
    class_name, priority = classes.resolve(priority_class_of(template))
    return Job(id=job_id, name=str(m.get("name", "")), namespace=str(m.get("namespace") or ""),
               kind=str(template.get("kind", "")), queue=queue_of(template), priority=priority,
               priority_class=class_name, labels=_labels(template), annotations=_labels(template, "annotations"),
               submit_time=submit_time, tasks=tasks_from_template(template))


def job_fingerprint(job: Job) -> tuple[Any, ...]:
    """What, if it changes, makes the engine re-key or re-charge the job (update_job)."""
    return (job.queue, job.priority, tuple((t.name, t.replicas, t.min_available, tuple(sorted(t.resources.items())))
                                           for t in job.tasks), tuple(sorted(job.labels.items())))

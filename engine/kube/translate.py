"""Kubernetes objects (plain dicts as the API returns them) -> the engine's model. Pure functions.

Why from the *template*: Karmada's Volcano Job interpreter defines no replica interpreter, so a Volcano Job's
binding says replicas 0 and no requirements. The demand of every task (replicas x pod requests) is read from
the resource template itself. Anything malformed raises ``InputError`` naming the object and field, so the
controller can log it and keep the job visible instead of crashing or losing it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from engine.errors import InputError, shown
from engine.kube.resource_models import node_shapes
from engine.model import Cluster, Job, Queue, Task
from engine.resources import DIVISIBLE, PODS, Resources, add_into, fraction_refused, parse_resources

Obj = Mapping[str, Any]
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1        # Kubernetes' and Volcano's counts and priorities are int32

QUEUE_LABEL = "volcano.sh/queue-name"
ATOLL_QUEUE = "atoll.dev/queue"
DEFAULT_QUEUE = "default"

VOLCANO_JOB = "batch.volcano.sh/v1alpha1/Job"
BATCH_JOB = "batch/v1/Job"
DEPLOYMENT = "apps/v1/Deployment"


def meta(obj: Obj) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def object_key(obj: Obj) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    m = meta(obj)
    ns = m.get("namespace")
    return f"{ns}/{m.get('name', '')}" if ns else str(m.get("name", ""))


def describe(obj: Obj) -> str:
    """``Kind ns/name`` for messages."""
    return f"{obj.get('kind', 'object')} {object_key(obj)}"


def _labels(obj: Obj, field: str = "labels") -> dict[str, str]:
    raw = meta(obj).get(field)
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def _items(value: Any) -> list[Any]:
    """A list field of an object (None and absent: []; any other type: [] too, for status written by other
    controllers; spec fields check the type themselves). ``value or ()`` iterated a number: TypeError."""
    return value if isinstance(value, list) else []


def _int(value: Any, where: str, default: int) -> int:
    """A count of the Kubernetes or Volcano API (replicas, minAvailable, parallelism, weight): an int32, 0 or more."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        raise InputError(f"expected an integer from 0 to {INT32_MAX} (int32), got {shown(value)}", where)
    return value


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


def _signed_int(value: Any, where: str) -> int:
    """An int32 of the API (a Volcano Queue's priority): beyond it, the policy's CEL conversion would overflow."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
        raise InputError(f"expected an integer from {INT32_MIN} to {INT32_MAX} (int32), got {shown(value)}", where)
    return value


# -- pods and demand -----------------------------------------------------------------------------------
def pod_requests(pod_spec: Any, where: str) -> Resources:
    """What the Kubernetes scheduler reserves for one pod: sum of containers (requests, else limits),
    at least each init container, plus overhead, plus one ``pods`` slot."""
    if not isinstance(pod_spec, Mapping):
        raise InputError("pod template spec is missing", where)
    total: Resources = {}
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise InputError("pod template has no containers", f"{where}.containers")
    for i, c in enumerate(containers):
        add_into(total, _container(c, f"{where}.containers[{i}]"))
    inits = pod_spec.get("initContainers") or []
    if not isinstance(inits, list):
        raise InputError(f"initContainers must be a list, got {type(inits).__name__}", f"{where}.initContainers")
    for i, c in enumerate(inits):
        init = _container(c, f"{where}.initContainers[{i}]")
        for name, amount in init.items():
            if amount > total.get(name, 0):
                total[name] = amount
    add_into(total, pod_resources(pod_spec.get("overhead"), f"{where}.overhead"))
    total[PODS] = total.get(PODS, 0) + 1
    return total


def pod_resources(mapping: object, where: str) -> Resources:
    """``parse_resources`` of a container's requests or limits or a pod's overhead, refusing what Kubernetes
    refuses in them (``ValidateResourceRequirements``): a fraction of a resource counted in whole units
    (``nvidia.com/gpu: 0.5`` would be rounded up and admitted, yet no such pod is ever created), and a name without
    a domain that is not a container resource (``pods: 5``: "must be a standard resource for containers")."""
    parsed = parse_resources(mapping, where)
    if isinstance(mapping, Mapping):
        for raw, value in mapping.items():
            name = str(raw)
            if name in DIVISIBLE or name.startswith("hugepages-"):
                continue
            if "/" not in name:
                raise InputError(f"{name} is not a resource a container can request (Kubernetes allows only cpu, "
                                 "memory, ephemeral-storage, hugepages-* and extended resources such as "
                                 "nvidia.com/gpu)", f"{where}.{name}")
            problem = fraction_refused(name, value)
            if problem is not None:
                raise InputError(problem, f"{where}.{name}")
    return parsed


def _container(c: Any, where: str) -> Resources:
    if not isinstance(c, Mapping):
        raise InputError("container must be a mapping", where)
    res = c.get("resources") or {}
    if not isinstance(res, Mapping):
        raise InputError("resources must be a mapping", f"{where}.resources")
    limits = pod_resources(res.get("limits"), f"{where}.resources.limits")
    requests = pod_resources(res.get("requests"), f"{where}.resources.requests")
    return {**limits, **requests}          # a missing request defaults to its limit, as in Kubernetes


def _pod_spec(template: Any) -> Any:
    return template.get("spec") if isinstance(template, Mapping) else None


def tasks_from_template(obj: Obj) -> list[Task]:
    """All tasks of the workload: Volcano Job tasks, a batch Job's parallel pods, a Deployment's replicas."""
    gvk = template_gvk(obj)
    where = describe(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InputError("spec is missing", where)
    if gvk == VOLCANO_JOB:
        return _volcano_tasks(spec, where)
    if gvk == BATCH_JOB:
        parallelism = _int(spec.get("parallelism"), f"{where}: spec.parallelism", 1)
        completions = spec.get("completions")
        if completions is not None:
            parallelism = min(parallelism, _int(completions, f"{where}: spec.completions", 1))
        res = pod_requests(_pod_spec(spec.get("template")), f"{where}: spec.template.spec")
        return [Task("job", parallelism, parallelism, res)]
    if gvk == DEPLOYMENT:
        replicas = _int(spec.get("replicas"), f"{where}: spec.replicas", 1)
        res = pod_requests(_pod_spec(spec.get("template")), f"{where}: spec.template.spec")
        return [Task("pod", replicas, min(1, replicas), res)]
    raise InputError(f"unsupported workload kind {gvk}", where)


def _volcano_tasks(spec: Mapping[str, Any], where: str) -> list[Task]:
    raw = spec.get("tasks")
    if raw is not None and not isinstance(raw, list):
        raise InputError(f"spec.tasks must be a non-empty list, got {type(raw).__name__}", where)
    if not raw:
        raise InputError("spec.tasks is empty", where)
    tasks: list[Task] = []
    explicit = False
    for i, t in enumerate(raw):
        at = f"{where}: spec.tasks[{i}]"
        if not isinstance(t, Mapping):
            raise InputError("task must be a mapping", at)
        replicas = _int(t.get("replicas"), f"{at}.replicas", 1)
        if t.get("minAvailable") is not None:
            explicit = True
        min_available = _int(t.get("minAvailable"), f"{at}.minAvailable", replicas)
        if min_available > replicas:
            # Volcano's admission webhook refuses the Job ("'minAvailable' is greater than 'replicas' in task")
            raise InputError(f"{min_available} is greater than the task's replicas ({replicas}); Volcano refuses "
                             "such a Job", f"{at}.minAvailable")
        res = pod_requests(_pod_spec(t.get("template")), f"{at}.template.spec")
        tasks.append(Task(str(t.get("name") or f"task{i}"), replicas, min_available, res))
    if spec.get("minAvailable") is None:
        return tasks
    left = _int(spec.get("minAvailable"), f"{where}: spec.minAvailable", 0)
    total = sum(task.replicas for task in tasks)
    if left > total:
        # Volcano: "job 'minAvailable' should not be greater than total replicas in tasks"
        raise InputError(f"{left} is greater than the total replicas of the tasks ({total}); Volcano refuses "
                         "such a Job", f"{where}: spec.minAvailable")
    if not explicit:
        # Volcano's job-level minAvailable counts pods of any task; Atoll fills tasks in order to that count.
        for task in tasks:
            task.min_available = min(task.replicas, left)
            left -= task.min_available
    return tasks


def template_gvk(obj: Obj) -> str:
    return f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}"


# -- queue and priority --------------------------------------------------------------------------------
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


def priority_class_of(obj: Obj) -> str:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ""
    if template_gvk(obj) == VOLCANO_JOB:
        if spec.get("priorityClassName"):
            return str(spec["priorityClassName"])
        for t in _items(spec.get("tasks")):
            pod = _pod_spec(t.get("template")) if isinstance(t, Mapping) else None
            if isinstance(pod, Mapping) and pod.get("priorityClassName"):
                return str(pod["priorityClassName"])
        return ""
    pod = _pod_spec(spec.get("template"))
    return str(pod.get("priorityClassName") or "") if isinstance(pod, Mapping) else ""


HIGHEST_USER_PRIORITY = 1_000_000_000
"""Kubernetes' ``HighestUserDefinablePriority``: only ``system-*`` classes may go above it (up to int32)."""


def priority_value_problem(name: str, value: Any) -> Optional[str]:
    """Why a PriorityClass ``value`` is one Kubernetes would refuse (None when it is fine): it is an int32, at most
    1e9 unless the class is a ``system-*`` one. Outside int64 it would crash the policy's CEL later."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {value!r}"
    if not INT32_MIN <= value <= INT32_MAX:
        return f"{value} is outside int32 [{INT32_MIN}, {INT32_MAX}], the range Kubernetes allows"
    if value > HIGHEST_USER_PRIORITY and not name.startswith("system-"):
        return f"{value} is above {HIGHEST_USER_PRIORITY:,}, the highest Kubernetes allows a class not named system-*"
    return None


class PriorityClasses:
    """PriorityClass name -> value, and the globalDefault one, kept from the PriorityClass cache. A class whose
    value Kubernetes would refuse is kept aside (``invalid``): a job naming it is refused naming the class."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}
        self.global_default: Optional[tuple[str, int]] = None
        self.invalid: dict[str, str] = {}
        self.invalid_default: Optional[str] = None

    def rebuild(self, objects: Mapping[str, Obj]) -> None:
        self.values.clear()
        self.invalid.clear()
        self.global_default = None
        self.invalid_default = None
        for obj in objects.values():
            name = str(meta(obj).get("name", ""))
            value = obj.get("value")
            problem = priority_value_problem(name, value)
            if problem is not None:
                self.invalid[name] = problem
                if obj.get("globalDefault"):
                    self.invalid_default = name
                continue
            assert isinstance(value, int)
            self.values[name] = value
            if obj.get("globalDefault"):
                self.global_default = (name, value)

    def resolve(self, class_name: str) -> tuple[str, int]:
        """(class name, value): the named class, else the globalDefault one, else ("", 0). InputError naming the
        PriorityClass when the class that applies has a value Kubernetes would refuse."""
        if not class_name:
            if self.global_default is None and self.invalid_default is not None:
                raise InputError(self.invalid[self.invalid_default], f"PriorityClass {self.invalid_default}: value")
            return self.global_default or ("", 0)
        if class_name in self.invalid:
            raise InputError(self.invalid[class_name], f"PriorityClass {class_name}: value")
        return class_name, self.values.get(class_name, 0)


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


# -- template status -----------------------------------------------------------------------------------
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

"""A workload's demand, read from its resource template: its tasks (Volcano Job tasks, a batch Job's parallel
pods, a Deployment's replicas) and what one pod of each reserves, as the Kubernetes scheduler counts it.
Anything malformed raises ``InputError`` naming the object and field."""

from __future__ import annotations

from typing import Any, Mapping

from engine.errors import InputError
from engine.kube.objects import BATCH_JOB, DEPLOYMENT, VOLCANO_JOB, Obj, _int, describe, template_gvk
from engine.model import Task
from engine.resources import DIVISIBLE, PODS, Resources, add_into, fraction_refused, parse_resources

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

"""Scenario files: YAML -> JSON Schema -> typed, fully expanded scenario.

Errors name the file and the field (``kubecon.yaml: spec.jobs[3].duration``), never a
traceback. Generators are expanded here with the scenario's seed, so two runs of the
same file (or two policies compared on it) see exactly the same jobs.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from engine._data import data_path
from engine.core.nodefit import DEFAULT_GRADES
from engine.errors import InputError
from engine.model import Job, Queue, Task
from engine.resources import PODS, Resources, add_into, fits, parse_resources, scale
from engine.sim.scenario_checks import DEFAULT_PERIODS, check_budget, check_periods, check_queue_tree, whole_resources
from engine.sim.scenario_models import parse_models
from engine.policy.schema_check import first_error, load_schema_file
from engine.policy.yaml_source import PathPart, YamlLimits, format_path, line_of, load_yaml, read_source

SCHEMA_PATH = data_path("schemas", "scenario.schema.json")
MEMBER_SCHEDULERS = ("volcano", "kube-default")
LIMITS = YamlLimits(max_bytes=8 << 20, max_nodes=200_000, max_depth=64)
"""A scenario file: 8 MiB, 200,000 YAML nodes (aliases expanded), 64 levels (see docs/simulator.md)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object, where: str) -> float:
    """Seconds from a number or a string like ``90s``, ``3m``, ``1h30m``."""
    if isinstance(value, bool):
        raise InputError(f"invalid duration {value!r} (expected seconds or e.g. '90s', '3m', '1h')", where)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"duration {value!r} is not a finite number of seconds", where)
        if value < 0:
            raise InputError(f"duration {value!r} is negative", where)
        try:
            seconds = float(value)
        except OverflowError:                   # an int of 310 digits or more
            seconds = math.inf
        return _finite(seconds, value, where)
    if isinstance(value, str):
        text = value.strip()
        parts = _DURATION.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return _finite(sum(float(n) * _UNITS[u] for n, u in parts), value, where)
        try:
            number = float(text)
        except ValueError:
            number = -1.0
        if not math.isfinite(number):          # 'inf', 'nan', '1e400'
            raise InputError(f"duration {value!r} is not a finite number of seconds", where)
        if number >= 0 and text:
            return number
    raise InputError(f"invalid duration {value!r} (expected seconds or e.g. '90s', '3m', '1h')", where)


def _finite(seconds: float, value: object, where: str) -> float:
    """``seconds`` if finite: a 400-digit number overflows to inf when converted."""
    if not math.isfinite(seconds):
        raise InputError(f"duration {value!r} is not a finite number of seconds", where)
    return seconds


DEFAULT_MAX_PODS = 110
"""A node's ``pods`` allocatable when the scenario gives none: the kubelet's default ``--max-pods``."""


def pod_request(resources: Resources) -> Resources:
    """One pod's request as the controller builds it (``engine.kube.translate.pod_requests``): what the
    scenario's task asks for plus one ``pods`` slot, so the engine counts pod slots as on a real fleet."""
    request = dict(resources)
    request[PODS] = request.get(PODS, 0) + 1
    return request


@dataclass
class ClusterSpec:
    name: str
    labels: dict[str, str]
    nodes: list[Resources]          # one entry per node (count expanded)
    ready: bool = True
    grades: Optional[list[Resources]] = None   # resource models: each grade's lower edges, in grade order

    @property
    def allocatable(self) -> Resources:
        total: Resources = {}
        for node in self.nodes:
            add_into(total, node)
        return total


@dataclass
class JobSpec:
    """A job as the scenario describes it; ``build()`` makes a fresh engine Job per run."""

    name: str
    queue: str
    submit_at: float
    duration: float
    tasks: list[Task]
    namespace: str = "default"
    priority: int = 0
    priority_class: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    deadline: Optional[float] = None
    where: str = ""                 # its place in the file, for messages
    propagation: str = "aggregated"  # karmada-scheduler replica scheduling (gate mode)

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.name}"

    def build(self) -> Job:
        return Job(id=self.id, name=self.name, namespace=self.namespace, queue=self.queue, priority=self.priority,
                   priority_class=self.priority_class, labels=dict(self.labels), annotations=dict(self.annotations),
                   submit_time=self.submit_at,
                   tasks=[Task(t.name, t.replicas, t.min_available, pod_request(t.resources)) for t in self.tasks])

    def min_demand(self) -> Resources:
        total: Resources = {}
        for task in self.tasks:
            add_into(total, scale(task.resources, task.min_available))
        return total


@dataclass
class ClusterEvent:
    at: float
    cluster: str
    ready: bool


@dataclass
class Scenario:
    name: str
    source: str
    seed: int
    status_period: float
    schedule_period: float
    horizon: float
    member_scheduler: str
    clusters: list[ClusterSpec]
    queues: list[Queue]
    jobs: list[JobSpec]
    events: list[ClusterEvent]
    stuck_after: float = 0.0    # the controller's --stuck-after: an attempt with pods unbound this long fails (0: off)

    def build_queues(self) -> list[Queue]:
        """Fresh Queue objects (the engine owns and mutates its copies)."""
        return [Queue(q.name, parent=q.parent, weight=q.weight, priority=q.priority, open=q.open,
                      capability=dict(q.capability) if q.capability is not None else None,
                      guarantee=dict(q.guarantee), deserved=dict(q.deserved) if q.deserved is not None else None,
                      labels=dict(q.labels), reclaimable=q.reclaimable) for q in self.queues]

    @property
    def fleet_allocatable(self) -> Resources:
        total: Resources = {}
        for c in self.clusters:
            add_into(total, c.allocatable)
        return total


def _parts(field_path: str, document: Any = None) -> list[PathPart]:
    """``spec.jobs[3].tasks[0].resources.cpu`` -> ["spec", "jobs", 3, "tasks", 0, "resources", "cpu"].
    Following ``document``, a key with dots that the text split (``resources.nvidia.com/gpu``) is joined
    again, so that the message can name its line."""
    tokens: list[tuple[str, str]] = re.findall(r"([^.\[\]]+)|\[(\d+)\]", field_path)
    parts: list[PathPart] = []
    node, k = document, 0
    while k < len(tokens):
        name, index = tokens[k]
        k += 1
        part: PathPart = int(index) if index else name
        if isinstance(node, dict) and not index and name not in node:
            joined, j = name, k
            while j < len(tokens) and tokens[j][0]:
                joined, j = f"{joined}.{tokens[j][0]}", j + 1
                if joined in node:
                    part, k = joined, j
                    break
        parts.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
    return parts


def load_scenario(path: str | Path, seed: Optional[int] = None) -> Scenario:
    """Load and expand a scenario file; ``seed`` overrides spec.seed (generators, pod interleaving)."""
    return load_scenario_text(read_source(path, "scenario", LIMITS), str(path), seed)


def load_scenario_text(text: str, source: str, seed: Optional[int] = None) -> Scenario:
    """Validate ``text`` (named ``source`` in every message) and expand it. Errors read
    ``file: spec.jobs[3].duration (line 41): invalid duration '90 seconds' ...``."""
    raw = load_yaml(text, source, LIMITS)     # duplicate keys are errors, syntax errors carry line/column
    problem = first_error(load_schema_file(SCHEMA_PATH), raw)
    if problem is not None:
        path, message = problem
        raise _located(text, source, path, message)
    try:
        return _build(raw, source, seed)
    except InputError as exc:
        prefix = f"{source}: "
        if not exc.where.startswith(prefix):
            raise
        raise _located(text, source, _parts(exc.where[len(prefix):], raw), exc.message) from None


def _located(text: str, source: str, path: list[PathPart], message: str) -> InputError:
    line = line_of(text, path, LIMITS)
    where = f"{source}: {format_path(path) or '(document)'}" + (f" (line {line})" if line else "")
    return InputError(message, where)


def _build(raw: dict[str, Any], source: str, seed_override: Optional[int]) -> Scenario:
    spec = raw["spec"]

    def at(field_path: str) -> str:
        return f"{source}: spec.{field_path}"

    seed = int(spec.get("seed", 0)) if seed_override is None else seed_override
    check_budget(spec, at)
    default_grades = parse_models(spec["resourceModels"], at("resourceModels")) if "resourceModels" in spec \
        else [dict(g) for g in DEFAULT_GRADES]
    clusters: list[ClusterSpec] = []
    for i, c in enumerate(spec["clusters"]):
        nodes: list[Resources] = []
        for j, group in enumerate(c["nodes"]):
            alloc = whole_resources(group["allocatable"], at(f"clusters[{i}].nodes[{j}].allocatable"))
            if PODS not in group["allocatable"]:     # every kubelet reports pod slots; an explicit 0 stays 0
                alloc[PODS] = DEFAULT_MAX_PODS
            nodes.extend(dict(alloc) for _ in range(int(group.get("count", 1))))
        grades = parse_models(c["resourceModels"], at(f"clusters[{i}].resourceModels")) \
            if "resourceModels" in c else default_grades
        clusters.append(ClusterSpec(c["name"], dict(c.get("labels", {})), nodes, bool(c.get("ready", True)),
                                    grades or None))
    _unique([c.name for c in clusters], at("clusters"), "cluster")

    queues: list[Queue] = []
    for i, q in enumerate(spec.get("queues", [])):
        where = f"queues[{i}]"
        queues.append(Queue(
            q["name"], parent=q.get("parent"), weight=int(q.get("weight", 1)), priority=int(q.get("priority", 0)),
            open=bool(q.get("open", True)),
            capability=parse_resources(q["capability"], at(f"{where}.capability"), keep_zero=True) if "capability" in q else None,
            guarantee=parse_resources(q.get("guarantee"), at(f"{where}.guarantee")),
            deserved=parse_resources(q["deserved"], at(f"{where}.deserved"), keep_zero=True) if "deserved" in q else None,
            labels=dict(q.get("labels", {})), reclaimable=bool(q.get("reclaimable", True))))
    _unique([q.name for q in queues], at("queues"), "queue")
    queue_names = {q.name for q in queues}
    for i, q in enumerate(queues):
        if q.parent is not None and q.parent not in queue_names:
            raise InputError(f"parent queue {q.parent!r} is not declared in spec.queues", at(f"queues[{i}].parent"))
    check_queue_tree(queues, at)

    propagation = spec.get("propagation", "aggregated")
    jobs: list[JobSpec] = []
    for i, j in enumerate(spec.get("jobs", [])):
        where = f"jobs[{i}]"
        jobs.append(_job(j, j["name"], parse_duration(j.get("submitAt", 0), at(f"{where}.submitAt")),
                         parse_duration(j["duration"], at(f"{where}.duration")), where, at, propagation))
    rng = random.Random(seed)
    for i, g in enumerate(spec.get("generators", [])):
        where = f"generators[{i}]"
        submit = g.get("submitAt", {})
        start = parse_duration(submit.get("start", 0), at(f"{where}.submitAt.start"))
        every = parse_duration(submit.get("every", 0), at(f"{where}.submitAt.every"))
        dur = g["duration"]
        if isinstance(dur, dict):
            low = parse_duration(dur["min"], at(f"{where}.duration.min"))
            high = parse_duration(dur["max"], at(f"{where}.duration.max"))
            if high < low:
                raise InputError(f"max {high:g}s is below min {low:g}s", at(f"{where}.duration"))
        else:
            low = high = parse_duration(dur, at(f"{where}.duration"))
        width = len(str(g["count"] - 1))
        for k in range(int(g["count"])):
            duration = low if high == low else round(rng.uniform(low, high), 3)
            jobs.append(_job(g, f"{g['namePrefix']}-{k:0{width}d}", start + k * every, duration, where, at,
                             propagation))
    _unique([j.id for j in jobs], at("jobs"), "job")

    used = {job.queue for job in jobs}
    if "default" in used and "default" not in queue_names:
        queues.append(Queue("default"))
        queue_names.add("default")
    for job in jobs:
        if job.queue not in queue_names:
            raise InputError(f"job {job.name}: queue {job.queue!r} is not declared in spec.queues "
                             f"(declared: {', '.join(sorted(queue_names)) or 'none'})", at(f"{job.where}.queue"))

    cluster_names = {c.name for c in clusters}
    events: list[ClusterEvent] = []
    for i, e in enumerate(spec.get("events", [])):
        if e["cluster"] not in cluster_names:
            raise InputError(f"unknown cluster {e['cluster']!r} (declared: {', '.join(sorted(cluster_names))})",
                             at(f"events[{i}].cluster"))
        events.append(ClusterEvent(parse_duration(e["at"], at(f"events[{i}].at")), e["cluster"], bool(e["ready"])))

    member = spec.get("memberScheduler", "volcano")
    status_period = _positive(spec.get("statusPeriod", DEFAULT_PERIODS["statusPeriod"]), at("statusPeriod"))
    schedule_period = parse_duration(spec.get("schedulePeriod", DEFAULT_PERIODS["schedulePeriod"]),
                                     at("schedulePeriod"))
    horizon = _positive(spec.get("horizon", "30d"), at("horizon"))
    check_periods(spec, horizon, {"statusPeriod": status_period, "schedulePeriod": schedule_period}, at)
    return Scenario(
        name=raw["metadata"]["name"], source=source, seed=seed,
        status_period=status_period, schedule_period=schedule_period, horizon=horizon,
        member_scheduler=member, clusters=clusters, queues=queues, jobs=jobs, events=events,
        stuck_after=parse_duration(spec.get("stuckAfter", 0), at("stuckAfter")))


def _positive(value: object, where: str) -> float:
    seconds = parse_duration(value, where)
    if seconds <= 0:
        raise InputError("must be greater than zero", where)
    return seconds


def _job(raw: dict[str, Any], name: str, submit_at: float, duration: float, where: str, at: Any,
         propagation: str = "aggregated") -> JobSpec:
    tasks: list[Task] = []
    for k, t in enumerate(raw["tasks"]):
        replicas = int(t["replicas"])
        minimum = int(t.get("minAvailable", replicas))
        if minimum > replicas:
            raise InputError(f"minAvailable {minimum} exceeds replicas {replicas}",
                             at(f"{where}.tasks[{k}].minAvailable"))
        resources = whole_resources(t["resources"], at(f"{where}.tasks[{k}].resources"))
        tasks.append(Task(t["name"], replicas, minimum, resources))
    _unique([t.name for t in tasks], at(f"{where}.tasks"), "task")
    deadline = parse_duration(raw["deadline"], at(f"{where}.deadline")) if "deadline" in raw else None
    return JobSpec(name=name, queue=raw.get("queue", "default"), submit_at=submit_at, duration=duration, tasks=tasks,
                   namespace=raw.get("namespace", "default"), priority=int(raw.get("priority", 0)),
                   priority_class=raw.get("priorityClassName", ""), labels=dict(raw.get("labels", {})),
                   annotations=dict(raw.get("annotations", {})), deadline=deadline, where=where,
                   propagation=raw.get("propagation", propagation))


def _unique(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{what} {name!r} is declared twice", where)
        seen.add(name)


def lower_bound(scenario: Scenario) -> float:
    """Makespan no schedule can beat: the busiest resource's work over its capacity, or the
    latest (submit + duration) of any job, whichever is larger. CPU decides for CPU-bound fleets.
    A job whose minimum exceeds the whole fleet can never run under any policy, so it is left out
    (counting it gave a bound above the makespan of a run where everything else finished)."""
    capacity = scenario.fleet_allocatable
    work: dict[str, float] = {}
    longest = 0.0
    for job in scenario.jobs:
        if not fits(job.min_demand(), capacity):
            continue
        longest = max(longest, job.submit_at + job.duration)
        for name, amount in job.min_demand().items():
            work[name] = work.get(name, 0.0) + amount * job.duration
    bound = max((w / capacity[name] for name, w in work.items() if capacity.get(name)), default=0.0)
    return max(bound, longest)


__all__ = ["ClusterEvent", "ClusterSpec", "JobSpec", "Scenario", "load_scenario", "load_scenario_text",
           "lower_bound", "parse_duration"]

"""Small builders for plugin tests: clusters, jobs and engines from short literals."""

from __future__ import annotations

from typing import Optional

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import parse_resources


def cluster(name: str, labels: Optional[dict[str, str]] = None, ready: bool = True, **alloc: str) -> Cluster:
    resources = {k.replace("_", "/").replace("nvidia/com", "nvidia.com"): v for k, v in alloc.items()}
    return Cluster(name=name, labels=labels or {}, ready=ready, allocatable=parse_resources(resources))


def task(name: str, replicas: int, min_available: Optional[int] = None, **req: str) -> Task:
    resources = {k.replace("_", "/").replace("nvidia/com", "nvidia.com"): v for k, v in req.items()}
    return Task(name, replicas, replicas if min_available is None else min_available, parse_resources(resources))


def job(name: str, *tasks: Task, queue: str = "q", labels: Optional[dict[str, str]] = None,
        annotations: Optional[dict[str, str]] = None) -> Job:
    return Job(id=name, name=name, queue=queue, labels=labels or {}, annotations=annotations or {},
               tasks=list(tasks))


def engine(stages: dict[str, list[Plugin]], clusters: list[Cluster], queues: tuple[str, ...] = ("q",)) -> Engine:
    e = Engine(Pipeline(stages))
    for c in clusters:
        e.upsert_cluster(c)
    for q in queues:
        e.upsert_queue(Queue(q))
    return e

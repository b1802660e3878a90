"""Builders shared by the queue/order/admit plugin tests."""

from __future__ import annotations

from typing import Optional

from engine.core.scheduler import Engine
from engine.model import Cluster, Job, Queue, Task
from engine.pipeline import Pipeline
from engine.plugin import Plugin
from engine.resources import Resources, parse_resources


def engine_with(**stages: list[Plugin]) -> Engine:
    return Engine(Pipeline(dict(stages)))


def cluster(name: str, cpu: str = "10", memory: str = "100Gi", gpu: int = 0) -> Cluster:
    res: dict[str, object] = {"cpu": cpu, "memory": memory}
    if gpu:
        res["nvidia.com/gpu"] = gpu
    return Cluster(name=name, allocatable=parse_resources(res))


def res(**amounts: object) -> Resources:
    """res(cpu="2", memory="1Gi", gpu=1) -> exact vector."""
    mapping = {("nvidia.com/gpu" if k == "gpu" else k): v for k, v in amounts.items()}
    return parse_resources(mapping)


def queue(name: str, parent: Optional[str] = None, weight: int = 1, priority: int = 0, open: bool = True,
          capability: Optional[Resources] = None, guarantee: Optional[Resources] = None,
          deserved: Optional[Resources] = None) -> Queue:
    return Queue(name=name, parent=parent, weight=weight, priority=priority, open=open, capability=capability,
                 guarantee=guarantee or {}, deserved=deserved)


def job(name: str, cpu: str = "1", q: str = "q", priority: int = 0, replicas: int = 1, submit: float = 0.0,
        labels: Optional[dict[str, str]] = None, memory: str = "") -> Job:
    per = {"cpu": cpu}
    if memory:
        per["memory"] = memory
    return Job(id=name, name=name, queue=q, priority=priority, submit_time=submit, labels=labels or {},
               tasks=[Task("worker", replicas, replicas, parse_resources(per))])


def admitted(engine: Engine, now: float = 0.0) -> list[str]:
    return [a.job_id for a in engine.cycle(now).admitted]

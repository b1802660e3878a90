"""The scenario loader's checks of the whole file: sizes before anything is expanded, periods against the horizon,
the queue tree, and resources Kubernetes counts in whole units (engine.sim.scenario calls them)."""

from __future__ import annotations

from typing import Any, Optional

from engine.errors import InputError
from engine.model import Queue
from engine.resources import Resources, fraction_refused, parse_resources

MAX_NODES = 100_000          # simulated nodes over all clusters, after ``count``
MAX_JOBS = 200_000           # jobs after generators are expanded (loading costs ~50 us a job)
MAX_PODS = 2_000_000         # replicas over all jobs: any of them may be live at once, ~650 bytes each (1.3 GiB)
MAX_PERIODS = 10_000_000     # horizon / statusPeriod and horizon / schedulePeriod: periodic ticks in one run


def check_budget(spec: dict[str, Any], at: Any) -> None:
    """Refuse a scenario that would expand beyond MAX_NODES / MAX_JOBS / MAX_PODS, before expanding it."""
    nodes = sum(int(g.get("count", 1)) for c in spec["clusters"] for g in c["nodes"])
    if nodes > MAX_NODES:
        raise InputError(f"{nodes:,} nodes in all clusters; at most {MAX_NODES:,}", at("clusters"))
    listed = spec.get("jobs", [])
    generators = spec.get("generators", [])
    jobs = len(listed) + sum(int(g["count"]) for g in generators)
    if jobs > MAX_JOBS:
        raise InputError(f"{jobs:,} jobs once generators are expanded; at most {MAX_JOBS:,}", at("generators"))

    def replicas(job: dict[str, Any]) -> int:
        return sum(int(t.get("replicas", 1)) for t in job.get("tasks", ()))

    pods = sum(replicas(j) for j in listed) + sum(int(g["count"]) * replicas(g) for g in generators)
    if pods > MAX_PODS:
        raise InputError(f"{pods:,} pods (replicas over all jobs); at most {MAX_PODS:,} (the simulator keeps every "
                         f"pod of a running job in memory)", at("jobs"))


DEFAULT_PERIODS = {"statusPeriod": 10.0, "schedulePeriod": 1.0}


def check_periods(spec: dict[str, Any], horizon: float, periods: dict[str, float], at: Any) -> None:
    """Refuse a period so short that the run up to the horizon would take more than MAX_PERIODS ticks
    (``statusPeriod: 1e-9`` simulated status reports for hours). ``schedulePeriod: 0`` (no batching) has
    no ticks of its own."""
    for name, period in periods.items():
        if period > 0 and horizon / period > MAX_PERIODS:
            blamed = name if period < DEFAULT_PERIODS[name] or "horizon" not in spec else "horizon"
            raise InputError(f"{name} {period:g}s and horizon {horizon:g}s make {horizon / period:.3g} periods; "
                             f"at most {MAX_PERIODS:,} (horizon / {name})", at(blamed))


def check_queue_tree(queues: list[Queue], at: Any) -> None:
    """Refuse a cycle of ``parent`` links (a queue its own parent included), at the first queue of the cycle
    found. Linear in the number of queues: each queue's chain is walked once."""
    index = {q.name: i for i, q in enumerate(queues)}
    parent = {q.name: q.parent for q in queues}
    done: set[str] = set()
    for q in queues:
        chain: list[str] = []
        on_chain: set[str] = set()
        name: Optional[str] = q.name
        while name is not None and name not in done:
            if name in on_chain:
                cycle = chain[chain.index(name):] + [name]
                if len(cycle) > 12:                 # one line, however long the cycle
                    cycle = cycle[:5] + [f"... ({len(cycle) - 7} more)"] + cycle[-2:]
                raise InputError(f"cycle {' -> '.join(cycle)}", at(f"queues[{index[name]}].parent"))
            chain.append(name)
            on_chain.add(name)
            name = parent[name]
        done.update(chain)


def whole_resources(mapping: object, where: str) -> Resources:
    """``parse_resources`` of a node's allocatable or a pod's request, refusing a fraction of a resource
    that Kubernetes counts in whole units (``nvidia.com/gpu: 0.5``)."""
    parsed = parse_resources(mapping, where)
    if isinstance(mapping, dict):
        for name, value in mapping.items():
            problem = fraction_refused(str(name), value)
            if problem is not None:
                raise InputError(problem, f"{where}.{name}")
    return parsed

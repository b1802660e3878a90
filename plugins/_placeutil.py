"""Helpers shared by the placement plugins: config defaults, durations, and exact replica fitting.

Fitting is integer arithmetic on resource vectors (``engine.resources``): how many
replicas of a task fit in what a cluster has free, and greedy packing of a job's
tasks into one or several clusters. Nothing here reads the clock or does I/O.
"""

from __future__ import annotations

import math

import re
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from engine.core.nodefit import NodeShapes, max_replicas, pack
from engine.errors import InputError, shown
from engine.policy.schema_check import first_error
from engine.model import Job, Placement, Pods, Task
from engine.resources import Resources, add_into, format_resources, scale

def configure(schema: dict[str, Any], config: Optional[Mapping[str, Any]], where: str) -> dict[str, Any]:
    """Validate ``config`` against the plugin's schema and fill in the top-level defaults, so a
    plugin built directly with ``{}`` behaves exactly as one loaded from a policy."""
    raw = dict(config or {})
    problem = first_error(schema, raw)      # the policy loader's choice of error, keys of any type included
    if problem is not None:
        parts, message = problem
        path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts)
        raise InputError(message, f"{where}{path}")
    for name, prop in schema.get("properties", {}).items():
        if name not in raw and isinstance(prop, dict) and "default" in prop:
            default = prop["default"]
            raw[name] = dict(default) if isinstance(default, dict) else \
                list(default) if isinstance(default, list) else default
    return raw


_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(value: object, where: str) -> float:
    """Seconds from a number or a Go-style duration string (``10s``, ``5m``, ``1h30m``)."""
    if isinstance(value, bool):
        raise InputError(f"expected seconds or a duration like '10s', got {value!r}", where)
    try:
        if isinstance(value, (int, float)):
            seconds = float(value)
        elif isinstance(value, str) and value and (match := _DURATION.match(value.strip())) and any(match.groups()):
            hours, minutes, secs = (float(g) if g else 0.0 for g in match.groups())
            seconds = hours * 3600 + minutes * 60 + secs
        else:
            raise InputError(f"expected seconds or a duration like '10s', '5m', '1h30m', got {value!r}", where)
    except OverflowError:               # an int of 310 digits or more
        seconds = math.inf
    if not math.isfinite(seconds):      # 310 digits of '9's overflow to inf: 'held until t=inf'
        raise InputError(f"duration {shown(value)} is not a finite number of seconds", where)
    if seconds < 0:
        raise InputError(f"duration {value!r} is negative", where)
    return seconds


# -- fitting ---------------------------------------------------------------------------------
def fit_count(per_replica: Mapping[str, int], free: Mapping[str, int], cap: int) -> int:
    """How many replicas (at most ``cap``) fit in ``free``. A replica asking for nothing always fits."""
    best = cap
    for name, amount in per_replica.items():
        if amount > 0:
            n = free.get(name, 0) // amount
            if n < best:
                best = n
                if best <= 0:
                    return 0
    return max(best, 0)


def place_in_one(job: Job, free: Mapping[str, int]) -> Optional[dict[str, int]]:
    """Replicas per task for ``job`` in a cluster with ``free``: minAvailable of every task
    (else None), then as many further replicas as fit, task by task in the job's order.
    None as well when not a single replica fits (a job of minAvailable 0 must still start)."""
    left = dict(free)
    out: dict[str, int] = {}
    for task in job.tasks:
        need = task.min_available
        if need and fit_count(task.resources, left, need) < need:
            return None
        add_into(left, scale(task.resources, need), -1)
        out[task.name] = need
    for task in job.tasks:
        extra = fit_count(task.resources, left, task.replicas - out[task.name])
        if extra:
            add_into(left, scale(task.resources, extra), -1)
            out[task.name] += extra
    placed = {name: n for name, n in out.items() if n}
    if not placed and any(t.replicas for t in job.tasks):
        return None             # minAvailable 0 everywhere still means "start something"
    return placed


def place_on_nodes(job: Job, state: Any, cluster: str) -> Optional[dict[str, int]]:
    """``place_in_one`` on the cluster's free totals, then on its virtual nodes when it reports node
    shapes (``FleetState.nodes``): the gang minimum must pack on them, and each task's extra replicas
    are cut to what still fits there."""
    part = place_in_one(job, state.free(cluster))
    shapes = state.nodes(cluster) if part is not None else None
    if shapes is None:
        return part
    left = pack(shapes, job.min_pods)
    if left is None:
        return None
    assert part is not None
    out: dict[str, int] = {}
    for task in job.tasks:
        n = part.get(task.name, 0)
        extra = n - task.min_available
        if extra > 0:
            extra = min(extra, max_replicas(left, task.resources))
            if extra:
                left = pack(left, [(task.resources, extra)]) or left
            n = task.min_available + extra
        if n:
            out[task.name] = n
    return out or None


def pods_text(pods: Pods) -> str:
    """``2 x nvidia.com/gpu=8, 1 x cpu=4``: a job's pods for refusal reasons."""
    return ", ".join(f"{n} x {format_resources(dict(vec))}" for vec, n in pods) or "no pods"


def whole_fits(job: Job, free: Mapping[str, int]) -> bool:
    for name, amount in job.demand.items():
        if amount > free.get(name, 0):
            return False
    return True


def pack_across(tasks: Sequence[Task], clusters: Iterable[str], free: Mapping[str, Resources],
                wanted: Mapping[str, int], nodes: Optional[dict[str, Optional[NodeShapes]]] = None
                ) -> tuple[Placement, dict[str, int], dict[str, Resources]]:
    """Greedy: fill clusters in the given order with up to ``wanted[task]`` replicas of each task.
    Returns the placement, what could not be placed, and what is left free per cluster.
    ``free`` is not mutated. ``nodes`` (cluster -> its node view, None for totals only) caps each cluster at
    the replicas its nodes can host, and is updated in place with what is left on them."""
    left = {name: dict(free[name]) for name in free}
    missing = {t.name: wanted.get(t.name, 0) for t in tasks if wanted.get(t.name, 0) > 0}
    placement: Placement = {}
    for cluster in clusters:
        if not missing:
            break
        room = left[cluster]
        for task in tasks:
            need = missing.get(task.name, 0)
            if not need:
                continue
            n = fit_count(task.resources, room, need)
            shapes = nodes.get(cluster) if nodes is not None else None
            if n and nodes is not None and shapes is not None:
                n = min(n, max_replicas(shapes, task.resources))
                if n:
                    nodes[cluster] = pack(shapes, [(task.resources, n)]) or shapes
            if n:
                add_into(room, scale(task.resources, n), -1)
                placement.setdefault(cluster, {})[task.name] = placement.get(cluster, {}).get(task.name, 0) + n
                if n == need:
                    del missing[task.name]
                else:
                    missing[task.name] = need - n
    return placement, missing, left


def merge(a: Placement, b: Placement) -> Placement:
    out: Placement = {c: dict(p) for c, p in a.items()}
    for cluster, tasks in b.items():
        target = out.setdefault(cluster, {})
        for task, n in tasks.items():
            target[task] = target.get(task, 0) + n
    return out


def placed_counts(placement: Placement) -> dict[str, int]:
    """Replicas per task summed over clusters."""
    counts: dict[str, int] = {}
    for tasks in placement.values():
        for task, n in tasks.items():
            counts[task] = counts.get(task, 0) + n
    return counts


def is_gang(job: Job) -> bool:
    """A job is a gang when some task needs more than one pod to start together (or several tasks do)."""
    return any(t.min_available > 1 for t in job.tasks) or sum(1 for t in job.tasks if t.min_available) > 1


# -- utilisation scores (binpack, spread) -------------------------------------------------------
def resource_weights(request: Mapping[str, int], weights: Mapping[str, int]) -> dict[str, int]:
    """The weights of the resources a job requests; equal weights when none of them is configured."""
    chosen = {name: weights.get(name, 0) for name in request if request[name] > 0 and weights.get(name, 0) > 0}
    return chosen or {name: 1 for name in request if request[name] > 0}


def utilisation_scores(job: Job, clusters: Sequence[Any], free_of: Callable[[str], Mapping[str, int]],
                       weights: Mapping[str, int], state: Any = None) -> list[Optional[int]]:
    """Per cluster, the weighted mean in percent (0-100, integer) of how full it would be with the
    whole job placed, or else with its gang minimum; None where not even that fits. The hot loop of
    binpack (higher = fuller) and spread (lower): one pass, no per-cluster allocations. With
    ``state`` (a FleetState), "fits" is also checked on the virtual nodes of clusters that report
    node shapes (``FleetState.fits_tasks``)."""
    if state is not None and state.any_node_shapes:
        return _node_scores(job, clusters, state, weights)
    whole = [(n, w, job.demand[n]) for n, w in resource_weights(job.demand, weights).items()]
    whole_weight = sum(w for _, w, _ in whole)
    minimum = job.min_demand
    least = None if minimum == job.demand else \
        [(n, w, minimum[n]) for n, w in resource_weights(minimum, weights).items()]
    out: list[Optional[int]] = []
    for cluster in clusters:
        free = free_of(cluster.name)
        allocatable = cluster.allocatable
        score = 0
        for name, weight, want in whole:          # inlined _utilisation: this loop runs per (job, cluster)
            have = free.get(name, 0)
            cap = allocatable.get(name, 0)
            if want > have or cap <= 0:
                break
            score += weight * ((cap - have + want) * 100 // cap)
        else:
            out.append(score // whole_weight if whole_weight else 0)
            continue
        out.append(None if least is None else _utilisation(least, free, allocatable))
    return out


def _node_scores(job: Job, clusters: Sequence[Any], state: Any, weights: Mapping[str, int]) -> list[Optional[int]]:
    """``utilisation_scores`` where "fits" is asked of the clusters' nodes too: the whole job's pods when
    they fit the cluster, else its gang minimum's (when that differs), else None. The weights are taken
    once per job, and each fit is read from the state's per-shape replica counts (``fits_tasks_on``)."""
    demand, minimum = job.demand, job.min_demand
    whole = [(n, w, demand[n]) for n, w in resource_weights(demand, weights).items()]
    # one pod shape (the common job): its replica counts are compared inline, not through a call per cluster
    single = state.replica_counts_for(job.pods)
    fits_whole = state.fits_tasks_on(job.pods) if single is None else None
    counts, count = single if single is not None else ({}, 0)
    least: Optional[list[tuple[str, int, int]]] = None
    fits_least: Optional[Callable[[str], bool]] = None
    if minimum != demand:
        least = [(n, w, minimum[n]) for n, w in resource_weights(minimum, weights).items()]
        fits_least = state.fits_tasks_on(job.min_pods)
    free_of = state.free
    whole_weight = sum(w for _, w, _ in whole)
    out: list[Optional[int]] = []
    for cluster in clusters:
        name = cluster.name
        if counts.get(name, 0) >= count if fits_whole is None else fits_whole(name):
            free = free_of(name)
            allocatable = cluster.allocatable
            score = 0
            for resource, weight, want in whole:      # inlined _utilisation: this loop runs per (job, cluster)
                have = free.get(resource, 0)
                cap = allocatable.get(resource, 0)
                if want > have or cap <= 0:
                    out.append(None)
                    break
                score += weight * ((cap - have + want) * 100 // cap)
            else:
                out.append(score // whole_weight if whole_weight else 0)
        elif fits_least is not None and least is not None and fits_least(name):
            out.append(_utilisation(least, free_of(name), cluster.allocatable))
        else:
            out.append(None)
    return out


def _utilisation(request: list[tuple[str, int, int]], free: Mapping[str, int],
                 allocatable: Mapping[str, int]) -> Optional[int]:
    total_weight = 0
    score = 0
    for name, weight, want in request:
        cap = allocatable.get(name, 0)
        have = free.get(name, 0)
        if want > have or cap <= 0:
            return None
        score += weight * ((cap - have + want) * 100 // cap)
        total_weight += weight
    return score // total_weight if total_weight else 0


class ReasonCache:
    """Refusal texts by (demand, what was free): formatting resource vectors costs ~20 us, and a
    saturated fleet refuses thousands of jobs of a few shapes against the same free capacity."""

    def __init__(self, limit: int = 4096) -> None:
        self._texts: dict[tuple[Any, ...], str] = {}
        self._limit = limit

    def get(self, template: str, need: Mapping[str, int], have: Mapping[str, int]) -> str:
        # what was free is part of the key only for a template that prints it ("less than {need} free" does not)
        key = (template, tuple(need.items()), tuple(have.get(k, 0) for k in need) if "{have}" in template else None)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= self._limit:
                self._texts.clear()
            text = self._texts[key] = template.format(need=format_resources(need),
                                                      have=format_resources({k: have.get(k, 0) for k in need}))
        return text

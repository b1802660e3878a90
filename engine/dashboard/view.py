"""The dashboard's view-model: engine state -> plain dicts, one function per page (jobs in ``jobs.py``).

Pure and synchronous: reads an Engine through its public attributes (``state.jobs``, ``queues``,
``clusters``, ``free``, ``inflight``, ``credits``, ``pending_count``) and a Source's adapter facts,
and returns JSON-ready dicts. The HTML pages and their ``/api/...`` twins render the same dict, so
what a test reads from the JSON is what a person sees. Fields other helpers may add to the model
(preemption counts, ...) are read with ``getattr`` defaults.

Amounts are exact integers in the dicts (``...Raw``) and formatted Kubernetes quantities for people.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from engine import fairshare
from engine.core.scheduler import Engine
from engine.dashboard.source import Source
from engine.model import JobState
from engine.reasons import reason_kind
from engine.resources import PODS, Resources, add_into, format_quantity

STARVED_BELOW = 0.9          # a queue with pending jobs under 90 % of its target share is starved
BORROWING_ABOVE = 1.1        # a queue above 110 % of its target share is borrowing others' share
MAX_REASONS = 5


def quantities(vector: Optional[Mapping[str, int]], names: Iterable[str]) -> dict[str, Optional[str]]:
    """Formatted amounts for ``names``; None where the vector does not list the resource."""
    if vector is None:
        return {n: None for n in names}
    return {n: format_quantity(n, vector[n]) if n in vector else None for n in names}


def dominant(allocated: Mapping[str, int], total: Mapping[str, int]) -> tuple[Optional[str], float]:
    """(dominant resource, its share of ``total``); pods are a count, not a resource anyone shares."""
    best_name, best = None, 0.0
    for name, amount in sorted(allocated.items()):
        if name == PODS or amount <= 0:
            continue
        cap = total.get(name, 0)
        share = amount / cap if cap > 0 else 1.0
        if share > best:
            best_name, best = name, share
    return best_name, best


def resource_names(engine: Engine) -> list[str]:
    """Every resource of the fleet (GPUs included), cpu and memory first; pods last."""
    names: set[str] = set()
    for c in engine.state.clusters.values():
        names |= set(c.allocatable)
    return sorted(names, key=lambda n: (n == PODS, n not in ("cpu", "memory"), n))


def header(source: Source) -> dict[str, Any]:
    engine = source.engine()
    policy = source.policy
    return {"source": source.info(), "now": source.now(), "absoluteTimes": source.absolute_times(),
            "version": source.version(), "leading": engine is not None,
            "policy": {"name": policy.name, "digest": policy.digest[:12], "generation": policy.generation}}


def queue_counts(engine: Engine) -> dict[str, dict[str, Any]]:
    """One pass over the jobs: per queue, pending / admitted / running counts and pending reasons."""
    out: dict[str, dict[str, Any]] = {}
    for job in engine.state.jobs.values():
        row = out.setdefault(job.queue, {"pending": 0, "admitted": 0, "running": 0, "finished": 0,
                                         "rejected": 0, "reasons": {}})
        state = job.state
        if state is JobState.PENDING:
            row["pending"] += 1
            kind = reason_kind(job.pending_reason) if job.pending_reason else "not examined yet"
            row["reasons"][kind] = row["reasons"].get(kind, 0) + 1
        elif state is JobState.ADMITTED:
            row["admitted"] += 1
        elif state is JobState.RUNNING:
            row["running"] += 1
        elif state is JobState.REJECTED:
            row["rejected"] += 1
        else:
            row["finished"] += 1
    return out


def queue_targets(engine: Engine, counts: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Hierarchical weighted-DRF target of every queue that competes now (has pending or admitted jobs)."""
    tree = {q.name: (q.parent, q.weight) for q in engine.state.queues.values()}
    active = [q for q, c in counts.items() if q in tree and (c["pending"] or c["admitted"] or c["running"])]
    return fairshare.targets(tree, active)


def share_sample(engine: Engine) -> dict[str, float]:
    """Dominant share of the fleet per queue, for the share-over-time ring buffer (O(queues))."""
    total = engine.state.fleet_allocatable
    return {q.name: round(dominant(q.allocated, total)[1], 4) for q in engine.state.queues.values()}


def queues_view(source: Source, history: Optional[list[tuple[float, dict[str, float]]]] = None) -> dict[str, Any]:
    engine = source.engine()
    out: dict[str, Any] = {"header": header(source), "queues": [], "resources": [], "history": []}
    if engine is None:
        return out
    state = engine.state
    names = resource_names(engine)
    total = state.fleet_allocatable
    counts = queue_counts(engine)
    targets = queue_targets(engine, counts)
    empty = {"pending": 0, "admitted": 0, "running": 0, "finished": 0, "rejected": 0, "reasons": {}}
    queue_names = set(state.queues) | set(counts)
    depth = {name: len(state.ancestors(name)) if name in state.queues else 0 for name in queue_names}
    rows = []
    tree = {q.name: (q.parent, q.weight) for q in state.queues.values()}
    for name in fairshare.tree_order(tree, queue_names):
        q = state.queues.get(name)
        c = counts.get(name, empty)
        allocated: Resources = dict(q.allocated) if q is not None else {}
        resource, share = dominant(allocated, total)
        target = targets.get(name)
        guarantee = dict(q.guarantee) if q is not None else {}
        over_guarantee = any(allocated.get(r, 0) > amount for r, amount in guarantee.items())
        reasons = sorted(c["reasons"].items(), key=lambda kv: (-kv[1], kv[0]))
        rows.append({
            "name": name, "known": q is not None, "parent": q.parent if q is not None else None,
            "depth": depth[name], "weight": q.weight if q is not None else None,
            "priority": q.priority if q is not None else None, "open": q.open if q is not None else None,
            "guarantee": quantities(guarantee, names),
            "capability": quantities(q.capability if q is not None else None, names),
            "allocated": quantities(allocated, names), "allocatedRaw": allocated,
            "dominantResource": resource, "dominantShare": round(share, 4),
            "target": round(target, 4) if target is not None else None,
            "guaranteeShare": round(dominant(guarantee, total)[1], 4) if guarantee else None,
            "pending": c["pending"], "admitted": c["admitted"] + c["running"], "running": c["running"],
            "finished": c["finished"], "rejected": c["rejected"],
            "pendingByReason": [{"reason": r, "count": n} for r, n in reasons[:MAX_REASONS]],
            "otherReasons": sum(n for _, n in reasons[MAX_REASONS:]),
            "borrowing": target is not None and share > target * BORROWING_ABOVE,
            "overGuarantee": over_guarantee,
            "starved": c["pending"] > 0 and target is not None and share < target * STARVED_BELOW,
            "preemptions": getattr(q, "preemptions", None),
        })
    out["queues"] = rows
    out["resources"] = names
    out["fleet"] = quantities(total, names)
    out["history"] = [{"time": t, "shares": shares} for t, shares in (history or [])]
    return out


def clusters_view(source: Source) -> dict[str, Any]:
    engine = source.engine()
    out: dict[str, Any] = {"header": header(source), "clusters": [], "resources": []}
    if engine is None:
        return out
    state = engine.state
    names = resource_names(engine)
    placed: dict[str, int] = {}
    by_queue: dict[str, dict[str, Resources]] = {}
    for job in state.jobs.values():
        if job.state.holds_resources and job.placement:
            for cluster in job.placement:
                placed[cluster] = placed.get(cluster, 0) + 1
                add_into(by_queue.setdefault(cluster, {}).setdefault(job.queue, {}), job.placed_demand(cluster))
    rows = []
    for c in sorted(state.clusters.values(), key=lambda c: c.name):
        reserved: Resources = {}
        for amount, _ in state.inflight(c.name).values():
            add_into(reserved, amount)
        for amount, _ in state.credits(c.name).values():
            add_into(reserved, amount, -1)
        free = state.free(c.name)
        resources = []
        for n in names:
            cap = c.allocatable.get(n, 0)
            used = c.allocated.get(n, 0) + c.allocating.get(n, 0)
            resources.append({
                "name": n, "capacity": format_quantity(n, cap), "allocated": format_quantity(n, used),
                "reserved": format_quantity(n, reserved.get(n, 0)), "free": format_quantity(n, free.get(n, 0)),
                "capacityRaw": cap, "allocatedRaw": used, "reservedRaw": reserved.get(n, 0),
                "freeRaw": free.get(n, 0),
                "usedFraction": round(min(1.0, (cap - free.get(n, 0)) / cap), 4) if cap > 0 else None,
            })
        rows.append({
            "name": c.name, "ready": c.ready, "labels": dict(sorted(c.labels.items())), "statusTime": c.status_time,
            "resources": resources, "jobs": placed.get(c.name, 0),
            "queues": [{"queue": q, "usage": quantities(v, [n for n in names if n in v])}
                       for q, v in sorted(by_queue.get(c.name, {}).items())],
        })
    out["clusters"] = rows
    out["resources"] = names
    return out


def refused_diff(running: str, refused: str) -> str:
    """A unified diff from the running policy to the refused edit: what the edit changed."""
    import difflib
    return "".join(difflib.unified_diff(running.splitlines(keepends=True), refused.splitlines(keepends=True),
                                        "running", "refused edit", n=2))


def policy_view(source: Source) -> dict[str, Any]:
    engine = source.engine()
    p = source.policy
    return {
        "header": header(source),
        "policy": {"name": p.name, "digest": p.digest, "source": p.source, "mode": p.mode, "text": p.text,
                   "generation": p.generation, "loadedAt": p.loaded_at,
                   "pipeline": engine.pipeline.describe() if engine is not None else {}},
        "refused": {"text": p.refused_text, "error": p.refused_error, "at": p.refused_at,
                    "count": p.refused_count, "diff": refused_diff(p.text, p.refused_text)}
        if p.refused_at is not None else None,
    }

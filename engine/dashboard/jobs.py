"""The Jobs and Job-detail view-models: filter, stable sort and page the engine's jobs; explain one job.

Filters come from the URL (``state``, ``queue``, ``cluster``, ``reason``, ``q``), so a filtered view is
a link. Sorting is stable (ties by job id) so rows never jump between live refreshes; a page is at
most ``MAX_LIMIT`` rows. Cost: one pass over the jobs plus a sort of the matches, and for pending
rows on the page, their queue's order (to show a position in the queue).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from engine.core.scheduler import Engine
from engine.dashboard.source import Source
from engine.dashboard.view import header
from engine.model import Job, JobState
from engine.reasons import reason_kind
from engine.resources import fits, format_resources, shortfall

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
STATES = {"pending": {JobState.PENDING}, "admitted": {JobState.ADMITTED, JobState.RUNNING},
          "running": {JobState.RUNNING}, "finished": {JobState.SUCCEEDED, JobState.FAILED},
          "rejected": {JobState.REJECTED}, "all": set(JobState)}
SORTS = ("submitted", "name", "queue", "priority", "state", "waiting", "attempts")


class Params:
    """The Jobs page's query, validated: unknown values fall back to the defaults (and say so)."""

    def __init__(self, query: Mapping[str, str]) -> None:
        self.notes: list[str] = []
        self.state = query.get("state", "all") or "all"
        if self.state not in STATES:
            self.notes.append(f"unknown state {self.state!r}: showing all")
            self.state = "all"
        self.queue = query.get("queue", "")
        self.cluster = query.get("cluster", "")
        self.reason = query.get("reason", "")
        self.text = query.get("q", "")
        self.sort = query.get("sort", "submitted") or "submitted"
        if self.sort not in SORTS:
            self.notes.append(f"unknown sort {self.sort!r}: sorted by submitted")
            self.sort = "submitted"
        self.descending = query.get("order", "asc") == "desc"
        self.page = _int(query.get("page"), 1, 1, 10**9)
        self.limit = _int(query.get("limit"), DEFAULT_LIMIT, 1, MAX_LIMIT)

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "queue": self.queue, "cluster": self.cluster, "reason": self.reason,
                "q": self.text, "sort": self.sort, "order": "desc" if self.descending else "asc",
                "page": self.page, "limit": self.limit}


def _int(text: Optional[str], default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(text))) if text else default
    except ValueError:
        return default


def _matches(job: Job, p: Params, states: set[JobState]) -> bool:
    if job.state not in states or (p.queue and job.queue != p.queue):
        return False
    if p.cluster and not (job.placement and p.cluster in job.placement and job.state.holds_resources):
        return False
    if p.reason and p.reason not in reason_kind(job.pending_reason) and p.reason not in job.pending_reason:
        return False
    return not p.text or p.text in job.id


def _sort_key(p: Params, now: float) -> Any:
    # every key ends with the job id: a total order, so equal rows keep their places between refreshes
    keys: dict[str, Any] = {
        "submitted": lambda j: (j.submit_time, j.id), "name": lambda j: (j.name, j.id),
        "queue": lambda j: (j.queue, j.submit_time, j.id), "priority": lambda j: (-j.priority, j.submit_time, j.id),
        "state": lambda j: (j.state.value, j.submit_time, j.id), "attempts": lambda j: (-j.attempts, j.id),
        "waiting": lambda j: (j.submit_time if j.state is JobState.PENDING else float("inf"), j.id),
    }
    return keys[p.sort]


def positions(engine: Engine, queues: set[str]) -> dict[str, int]:
    """1-based position of each pending job of ``queues`` in the engine's order for its queue.

    The engine keeps each queue's pending jobs sorted (``Engine._pending``, a SortedList of
    (sort key, seq, id)); when present it is read as is (no sort here). Otherwise the order is
    rebuilt from the public job fields with one pass and one sort per queue."""
    index = getattr(engine, "_pending", None)
    out: dict[str, int] = {}
    if isinstance(index, dict):
        for queue in queues:
            for i, entry in enumerate(index.get(queue, ())):
                out[entry[-1]] = i + 1
        return out
    by_queue: dict[str, list[Job]] = {q: [] for q in queues}
    for job in engine.state.jobs.values():
        if job.state is JobState.PENDING and job.queue in by_queue:
            by_queue[job.queue].append(job)
    for pending in by_queue.values():
        pending.sort(key=lambda j: (j.sort_key, j.seq))
        out.update((j.id, i + 1) for i, j in enumerate(pending))
    return out


def placement_text(job: Job) -> str:
    if not job.placement:
        return ""
    return "; ".join(f"{c}: " + ", ".join(f"{t}={n}" for t, n in sorted(p.items()))
                     for c, p in sorted(job.placement.items()))


def job_row(job: Job, now: float, position: Optional[int]) -> dict[str, Any]:
    pending = job.state is JobState.PENDING
    return {
        "id": job.id, "name": job.name, "namespace": job.namespace, "kind": job.kind, "queue": job.queue,
        "state": job.state.value, "priority": job.priority, "submitted": job.submit_time,
        "waiting": round(max(0.0, now - job.submit_time), 3) if pending else None,
        "reason": job.pending_reason, "position": position, "attempts": job.attempts,
        "requeues": job.attempts if pending else max(0, job.attempts - 1),     # admissions that did not last
        "preemptions": getattr(job, "preemptions", None),
        "demand": format_resources(job.demand), "placement": placement_text(job),
        "clusters": sorted(job.placement) if job.placement and job.state.holds_resources else [],
        "admittedAt": job.admitted_at if job.state.holds_resources else None,
    }


def jobs_view(source: Source, query: Mapping[str, str]) -> dict[str, Any]:
    p = Params(query)
    out: dict[str, Any] = {"header": header(source), "params": p.as_dict(), "notes": p.notes, "rows": [],
                           "total": 0, "matched": 0, "pages": 1, "groups": [], "queues": [], "clusters": []}
    engine = source.engine()
    if engine is None:
        return out
    now = source.now()
    states = STATES[p.state]
    jobs = engine.state.jobs
    matched = [j for j in jobs.values() if _matches(j, p, states)]
    matched.sort(key=_sort_key(p, now), reverse=p.descending)
    pages = max(1, -(-len(matched) // p.limit))
    page = min(p.page, pages)
    rows = matched[(page - 1) * p.limit: page * p.limit]
    order = positions(engine, {j.queue for j in rows if j.state is JobState.PENDING})
    groups: dict[tuple[str, str], int] = {}
    for job in matched:
        if job.state is JobState.PENDING:
            key = (reason_kind(job.pending_reason) if job.pending_reason else "not examined yet", job.queue)
            groups[key] = groups.get(key, 0) + 1
    out.update({
        "rows": [job_row(j, now, order.get(j.id)) for j in rows],
        "total": len(jobs), "matched": len(matched), "pages": pages,
        "groups": [{"reason": r, "queue": q, "count": n}
                   for (r, q), n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))[:10]],
        "queues": sorted(set(engine.state.queues) | {j.queue for j in matched}),
        "clusters": sorted(engine.state.clusters),
    })
    out["params"]["page"] = page
    return out


def cluster_verdicts(engine: Engine, job: Job) -> list[dict[str, Any]]:
    """For a waiting job, each cluster's answer: not ready, excluded, refused by a filter plugin, too full
    for the gang minimum, or fits (then what holds the job is its queue or order, in ``reason``)."""
    state = engine.state
    clusters = sorted(state.clusters.values(), key=lambda c: c.name)
    ready = [c for c in clusters if c.ready and c.name not in job.excluded_clusters]
    refused: dict[str, str] = {}
    if ready and engine.pipeline.has_filter:
        try:
            for part in engine.pipeline.filter(job=job, clusters=ready, state=state):
                refused.update(part)
        except Exception as exc:            # a plugin bug must not take the page down: show it instead
            refused = {c.name: f"filter plugins failed: {exc}" for c in ready}
    out = []
    for c in clusters:
        free = state.free(c.name)
        if not c.ready:
            verdict, why = "refused", "cluster is not ready"
        elif c.name in job.excluded_clusters:
            verdict, why = "refused", "excluded after a failure there"
        elif c.name in refused:
            verdict, why = "refused", refused[c.name]
        elif not fits(job.min_demand, free):
            verdict, why = "refused", f"too full: short of {format_resources(shortfall(job.min_demand, free))} " \
                                      f"for the gang minimum {format_resources(job.min_demand)}"
        else:
            verdict, why = "fits", f"the gang minimum fits in what is free ({format_resources(free)})"
        out.append({"cluster": c.name, "verdict": verdict, "reason": why})
    return out


def job_view(source: Source, job_id: str) -> Optional[dict[str, Any]]:
    engine = source.engine()
    if engine is None:
        return {"header": header(source), "job": None}
    job = engine.state.jobs.get(job_id)
    if job is None:
        return None
    now = source.now()
    position = positions(engine, {job.queue}).get(job.id) if job.state is JobState.PENDING else None
    row = job_row(job, now, position)
    row.update({
        "labels": dict(sorted(job.labels.items())), "annotations": dict(sorted(job.annotations.items())),
        "priorityClass": job.priority_class, "notBefore": job.not_before or None,
        "excludedClusters": sorted(job.excluded_clusters),
        "tasks": [{"name": t.name, "replicas": t.replicas, "minAvailable": t.min_available,
                   "resources": format_resources(t.resources)} for t in job.tasks],
    })
    timeline: list[dict[str, Any]] = [{"time": job.submit_time, "event": "submitted", "detail": f"to {job.queue}"}]
    history = source.history(job.id)
    if history is not None:
        for n, (at, reason) in enumerate(history.reasons, 1):
            timeline.append({"time": at, "event": "waiting", "detail": reason})
            if n == history.first and history.not_kept:
                timeline.append({"time": at, "event": "waiting",
                                 "detail": f"... {history.not_kept} more changes of reason, not kept"})
        for n, a in enumerate(history.attempts, 1):
            where = "; ".join(f"{c}: " + ", ".join(f"{t}={k}" for t, k in sorted(p.items()))
                              for c, p in sorted(a.placement.items()))
            timeline.append({"time": a.admitted_at, "event": f"attempt {n} admitted", "detail": where})
            if a.started_at is not None:
                timeline.append({"time": a.started_at, "event": f"attempt {n} running", "detail": ""})
            if a.ended_at is not None:
                timeline.append({"time": a.ended_at, "event": f"attempt {n} {a.outcome}", "detail": a.message})
    else:
        if job.pending_reason:
            timeline.append({"time": None, "event": "waiting", "detail": job.pending_reason})
        if job.admitted_at is not None:
            timeline.append({"time": job.admitted_at, "event": f"attempt {job.attempts} admitted",
                             "detail": placement_text(job)})
    if job.pending_reason and history is not None and not history.reasons:
        timeline.append({"time": None, "event": "waiting", "detail": job.pending_reason})
    timeline.sort(key=lambda e: (e["time"] is None, e["time"] or 0.0))
    return {
        "header": header(source), "job": row, "timeline": timeline,
        "explain": engine.explain(job.id),
        "clusters": cluster_verdicts(engine, job) if job.state is JobState.PENDING else [],
    }

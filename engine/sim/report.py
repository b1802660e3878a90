"""The simulation's result as JSON: every job, every attempt, where its replicas ran, and a summary.

Times are seconds from the start of the simulation. The summary is what a person
compares between policies: whether every job ran, makespan against a lower bound, partial
gangs, waits (overall and per queue), why jobs waited, utilisation of every resource, and
how close each queue's dominant share came to its hierarchical fair-share target.

This is the one place these numbers are computed: the terminal table, ``--compare``, the
HTML report and the dashboard read them from here. A number that cannot be computed (no
saturated sample, no job started) is ``None`` ("undefined"), never a 0 that would look best.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator, Optional

from engine import fairshare
from engine.reasons import reason_kind
from engine.resources import PODS, add_into, scale
from engine.sim.outcome import REASONS_FIRST, Sample, SimJob, SimResult
from engine.sim.scenario import lower_bound
from engine.stats import percentile

STATES = ("Succeeded", "Failed", "Pending", "Running")


def _r(value: Optional[float], digits: int = 3) -> Optional[float]:
    return None if value is None else round(value, digits)


def job_record(sim: SimJob) -> dict[str, Any]:
    return {
        "name": sim.spec.name,
        "namespace": sim.spec.namespace,
        "queue": sim.spec.queue,
        "state": sim.state,
        "reason": sim.reason,
        "submitTime": _r(sim.spec.submit_at),
        "finishTime": _r(sim.finish_time),
        "duration": _r(sim.spec.duration),
        "partialGang": sim.partial,
        "reasons": [{"time": _r(t), "reason": r} for t, r in sim.reasons],
        "reasonsNotKept": sim.reasons_dropped,
        "attempts": [{
            "admitTime": _r(a.admit_time),
            "startTime": _r(a.start_time),
            "endTime": _r(a.end_time),
            "outcome": a.outcome,
            "message": a.message,
            **({"preemptedBy": a.preempted_by} if a.preempted_by else {}),
            "placement": {c: dict(sorted(p.items())) for c, p in sorted(a.placement.items())},
            "placedTime": _r(a.placed_time),
        } for a in sim.attempts],
    }


def wait_time(sim: SimJob) -> Optional[float]:
    """Submission to the start of the last attempt that started (the one the user got)."""
    for attempt in reversed(sim.attempts):
        if attempt.start_time is not None:
            return attempt.start_time - sim.spec.submit_at
    return None


def stalled(result: SimResult) -> dict[str, Any]:
    """Attempts that waited after admission before their gang ran (in a member for lack of a node, or,
    in gate mode, for karmada-scheduler to place them): how many, how many longer than two status
    periods (what the engine could have learnt by then), and the time they waited. An attempt that
    never ran waits until it failed or the simulation ended."""
    limit = 2 * result.scenario.status_period
    waits: list[float] = []
    unplaced = 0
    for j in result.jobs.values():
        for a in j.attempts:
            until = a.start_time if a.start_time is not None else a.end_time if a.end_time is not None \
                else result.end_time
            if a.start_time is None and a.end_time is not None and a.outcome in ("Unschedulable", "ClusterLost") \
                    and a.end_time == a.admit_time:
                continue                     # refused on arrival: it never waited
            wait = until - a.admit_time
            if wait > 0:
                waits.append(wait)
                if a.placed_time is None:
                    unplaced += 1
    return {"placementMode": result.placement_mode, "attempts": len(waits),
            "beyondTwoStatusPeriods": sum(1 for w in waits if w > limit), "seconds": _r(sum(waits)),
            "maxSeconds": _r(max(waits, default=None)), "neverPlaced": unplaced}


def pending_reasons(result: SimResult, limit: int = 10) -> list[dict[str, Any]]:
    """The most common reasons jobs waited for, by the number of jobs that were given them."""
    jobs_by_kind: dict[str, set[str]] = {}
    example: dict[str, str] = {}
    for sim in result.jobs.values():
        for kind, reason in _kinds(sim):
            jobs_by_kind.setdefault(kind, set()).add(sim.spec.id)
            example.setdefault(kind, reason)
    ranked = sorted(jobs_by_kind.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    return [{"reason": kind, "jobs": len(ids), "example": example[kind]} for kind, ids in ranked]


def _kinds(sim: SimJob) -> Iterator[tuple[str, str]]:
    """The kind of each reason the job was given, in time order, those not kept included (by their first)."""
    kept = [(reason_kind(reason), reason) for _, reason in sim.reasons]
    if not sim.dropped_kinds:
        return iter(kept)
    return itertools.chain(kept[:REASONS_FIRST], sim.dropped_kinds.items(), kept[REASONS_FIRST:])


def outcome(by_state: dict[str, int]) -> dict[str, Any]:
    """Did every job run to completion? If not, say so first: such a run's makespan only covers the
    jobs that finished, so it is not comparable with a complete run's."""
    problems = []
    if by_state["Failed"]:
        problems.append(f"{by_state['Failed']} failed")
    if by_state["Pending"]:
        problems.append(f"{by_state['Pending']} never ran")
    if by_state["Running"]:
        problems.append(f"{by_state['Running']} still running at the end")
    return {"complete": not problems, "failed": by_state["Failed"],
            "unfinished": by_state["Pending"] + by_state["Running"], "problems": problems}


def summarise(result: SimResult) -> dict[str, Any]:
    jobs = list(result.jobs.values())
    by_state = {s: sum(1 for j in jobs if j.state == s) for s in STATES}
    finished = [j.finish_time for j in jobs if j.finish_time is not None and j.state in ("Succeeded", "Failed")]
    makespan = max(finished, default=0.0)
    bound = lower_bound(result.scenario)
    waits = [w for w in (wait_time(j) for j in jobs) if w is not None]
    outcomes: dict[str, int] = {}
    for j in jobs:
        for a in j.attempts:
            outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
    fleet = result.scenario.fleet_allocatable
    ended = outcome(by_state)
    complete = ended["complete"]
    # held work is counted up to the end of the simulation: a run that left jobs unfinished is measured over all
    # of it, not over the makespan of the jobs that finished (which would put utilisation above 100 %)
    span = makespan if complete and makespan else result.end_time
    useful: dict[str, float] = {}
    for j in jobs:
        demand: dict[str, int] = {}
        for t in j.spec.tasks:
            add_into(demand, scale(t.resources, t.replicas))
        for a in j.attempts:
            if a.start_time is not None:        # one still running at the end ran until then
                end = a.end_time if a.end_time is not None else result.end_time
                for name, amount in demand.items():
                    useful[name] = useful.get(name, 0.0) + amount * (end - a.start_time)

    def util(work: dict[str, float]) -> dict[str, Optional[float]]:
        return {name: _r(work.get(name, 0.0) / (fleet[name] * span), 4) if span > 0 else None
                for name in sorted(fleet) if name != PODS}

    return {
        "jobs": {"total": len(jobs), **by_state},
        "outcome": ended,
        "makespan": _r(makespan),
        "lowerBound": _r(bound),
        # undefined for an incomplete run: its makespan covers only the jobs that finished (it can fall below the
        # lower bound, which every job counts)
        "makespanRatio": _r(makespan / bound, 4) if complete and bound > 0 and makespan > 0 else None,
        "partialGangs": sum(1 for j in jobs if j.partial),
        "stalled": stalled(result),
        "attempts": {"total": sum(len(j.attempts) for j in jobs), "byOutcome": dict(sorted(outcomes.items()))},
        "wait": {"p50": _r(percentile(waits, 50)), "p95": _r(percentile(waits, 95)),
                 "max": _r(max(waits, default=None))},
        "utilisation": {"held": util(result.held), "useful": util(useful)},
        "preemption": preemption_summary(jobs),
        "queues": queue_shares(result),
        "pendingReasons": pending_reasons(result),
        "simulation": {"wallSeconds": _r(result.wall_seconds), "cycles": result.cycles,
                       "jobsExamined": result.examined, "endTime": _r(result.end_time),
                       "horizonReached": result.horizon_reached, "pluginErrors": result.plugin_errors},
    }


def preemption_summary(jobs: list[SimJob]) -> dict[str, Any]:
    """Preemptions (attempts ended ``Preempted``), distinct jobs evicted, the most times one job was, and
    the work lost: what preempted attempts had run (resource-seconds; GPU-hours), all redone later."""
    lost: dict[str, float] = {}
    preemptions, evicted, most = 0, 0, 0
    for j in jobs:
        times = 0
        demand: dict[str, int] = {}
        for t in j.spec.tasks:
            add_into(demand, scale(t.resources, t.replicas))
        for a in j.attempts:
            if a.outcome != "Preempted":
                continue
            times += 1
            if a.start_time is not None and a.end_time is not None:
                for name, amount in demand.items():
                    if name != PODS:
                        lost[name] = lost.get(name, 0.0) + amount * (a.end_time - a.start_time)
        preemptions += times
        evicted += 1 if times else 0
        most = max(most, times)
    gpu_seconds = sum(v for k, v in lost.items() if k.endswith("gpu"))
    return {"preemptions": preemptions, "jobsEvicted": evicted, "mostPerJob": most,
            "workLost": {k: _r(v, 1) for k, v in sorted(lost.items())}, "gpuHoursLost": _r(gpu_seconds / 3600, 3)}


def queue_shares(result: SimResult) -> dict[str, Any]:
    """Per queue with jobs (and its ancestors): dominant share of the fleet (engine's admitted usage)
    over time; during saturation (every queue with jobs has a backlog) its fraction of what all
    competing queues held, against its hierarchical target (``engine.fairshare``); waits.

    Fractions are taken of the root queues' total (a parent's usage includes its children's), so
    they add up to 1 over the roots and over the leaves of a hierarchy alike."""
    with_jobs = sorted({j.spec.queue for j in result.jobs.values()})
    tree = {q.name: (q.parent, q.weight) for q in result.scenario.queues}
    target = fairshare.targets(tree, [q for q in with_jobs if q in tree])
    shown = fairshare.tree_order(tree, set(with_jobs) | set(target))
    saturated = [s for s in result.timeline if all(s.queue_backlog.get(q, 0) > 0 for q in with_jobs)]
    sat_mean = {q: (sum(s.queue_share.get(q, 0.0) for s in saturated) / len(saturated)) if saturated else None
                for q in shown}
    sat_total = sum(sat_mean[q] or 0.0 for q in fairshare.roots(tree, target) if q in sat_mean)
    waits: dict[str, list[float]] = {q: [] for q in shown}
    for j in result.jobs.values():
        w = wait_time(j)
        if w is not None:
            waits[j.spec.queue].append(w)
    out: dict[str, Any] = {}
    for q in shown:
        series = [s.queue_share.get(q, 0.0) for s in result.timeline]
        goal = target.get(q)
        mean = sat_mean[q]
        fraction = mean / sat_total if mean is not None and sat_total > 0 else None
        out[q] = {
            "parent": tree[q][0] if q in tree else None,
            "weight": tree[q][1] if q in tree else 1,
            "jobs": sum(1 for j in result.jobs.values() if j.spec.queue == q),
            "targetFraction": _r(goal, 4),
            "meanShare": _r(sum(series) / len(series), 4) if series else None,
            "p50Share": _r(percentile(series, 50), 4),
            "maxShare": _r(max(series, default=None), 4),
            "saturatedSamples": len(saturated),
            "saturatedMeanShare": _r(mean, 4),
            "saturatedFraction": _r(fraction, 4),
            "deviationFromWeight": _r(abs(fraction - goal) / goal, 4) if fraction is not None and goal else None,
            "wait": {"p50": _r(percentile(waits[q], 50)), "p95": _r(percentile(waits[q], 95)),
                     "started": len(waits[q])},
        }
    return out


def worst_deviation(summary: dict[str, Any]) -> Optional[float]:
    """The largest relative distance of a queue's saturated fraction from its target; None (undefined)
    unless every queue with jobs has one (no saturated sample: fairness was never tested)."""
    rows = [q for q in summary["queues"].values() if q.get("jobs")]
    if len(rows) < 2 or any(q["deviationFromWeight"] is None for q in rows):
        return None
    return max(q["deviationFromWeight"] for q in rows)


def _submitted(sim: SimJob) -> tuple[float, str]:
    return sim.spec.submit_at, sim.spec.id


def build_report(result: SimResult, jobs: bool = True) -> dict[str, Any]:
    """The whole report; without ``jobs`` its per-job records are left out (the terminal summary and the plot do
    not read them, and at 100,000 jobs they are the largest part of it)."""
    summary = summarise(result)
    return {
        "scenario": result.scenario.name,
        "scenarioFile": result.scenario.source,
        "policy": result.policy,
        "seed": result.scenario.seed,
        "memberScheduler": result.scenario.member_scheduler,
        "placementMode": result.placement_mode,
        "statusPeriod": result.scenario.status_period,
        "makespan": summary["makespan"],
        "summary": summary,
        **({"jobs": [job_record(j) for j in sorted(result.jobs.values(), key=_submitted)]} if jobs else {}),
        **timeline(result.timeline, result.scenario.status_period),
    }


TIMELINE_MAX = 10_000
"""Samples in a report's timeline at most: a longer run's status ticks are averaged in equal buckets (a 40-day run
at one tick per 10 s wrote 65 MB of JSON per policy, and 20 MB of HTML)."""


def timeline(samples: list[Sample], period: float) -> dict[str, Any]:
    """The report's ``timeline`` and ``timelineStep`` (seconds between two of its samples): one sample per status
    tick up to ``TIMELINE_MAX``; beyond, each is the mean of ``k`` consecutive ticks (the last bucket may hold
    fewer), at the time of its first: the spacing stays even (the plot smooths over a minute of samples) and each
    sample says what its ticks said on average."""
    k = -(-len(samples) // TIMELINE_MAX)
    if k <= 1:
        return {"timelineStep": period, "timeline": [{
            "time": _r(s.time), "backlog": s.backlog, "waitingInMembers": s.waiting_in_members, "running": s.running,
            "usefulShare": _r(s.useful, 4),
            "clusterUtilisation": {c: _r(v, 4) for c, v in s.cluster_util.items()},
            "queueShare": {q: _r(v, 4) for q, v in s.queue_share.items()},
        } for s in samples]}
    rows = []
    for start in range(0, len(samples), k):
        bucket = samples[start:start + k]
        n = len(bucket)
        rows.append({
            "time": _r(bucket[0].time),
            "backlog": _r(sum(s.backlog for s in bucket) / n, 2),
            "waitingInMembers": _r(sum(s.waiting_in_members for s in bucket) / n, 2),
            "running": _r(sum(s.running for s in bucket) / n, 2),
            "usefulShare": _r(sum(s.useful for s in bucket) / n, 4),
            "clusterUtilisation": _means([s.cluster_util for s in bucket]),
            "queueShare": _means([s.queue_share for s in bucket]),
        })
    return {"timelineStep": period * k, "timeline": rows}


def _means(values: list[dict[str, float]]) -> dict[str, Optional[float]]:
    """Per key, the mean over ``values`` (a key missing from one counts as 0 there)."""
    keys = dict.fromkeys(key for value in values for key in value)
    return {key: _r(sum(value.get(key, 0.0) for value in values) / len(values), 4) for key in keys}

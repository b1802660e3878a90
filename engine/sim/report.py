"""The simulation's result as JSON: every job, every attempt, where its replicas ran, and a summary.

Times are seconds from the start of the simulation. The summary is what a person
compares between policies: makespan against a lower bound, partial gangs, waits,
utilisation, and how close each queue's dominant share came to its weight.
"""

from __future__ import annotations

from typing import Any, Optional

from engine.resources import PODS, add_into, scale
from engine.sim.driver import SimJob, SimResult
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
        "attempts": [{
            "admitTime": _r(a.admit_time),
            "startTime": _r(a.start_time),
            "endTime": _r(a.end_time),
            "outcome": a.outcome,
            "message": a.message,
            **({"preemptedBy": a.preempted_by} if a.preempted_by else {}),
            "placement": {c: dict(sorted(p.items())) for c, p in sorted(a.placement.items())},
        } for a in sim.attempts],
    }


def wait_time(sim: SimJob) -> Optional[float]:
    """Submission to the start of the last attempt that started (the one the user got)."""
    for attempt in reversed(sim.attempts):
        if attempt.start_time is not None:
            return attempt.start_time - sim.spec.submit_at
    return None


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
    span = makespan or result.end_time
    useful: dict[str, float] = {}
    for j in jobs:
        demand: dict[str, int] = {}
        for t in j.spec.tasks:
            add_into(demand, scale(t.resources, t.replicas))
        for a in j.attempts:
            if a.start_time is not None and a.end_time is not None:
                for name, amount in demand.items():
                    useful[name] = useful.get(name, 0.0) + amount * (a.end_time - a.start_time)

    def util(work: dict[str, float]) -> dict[str, Optional[float]]:
        return {name: _r(work.get(name, 0.0) / (fleet[name] * span), 4) if span > 0 else None
                for name in sorted(fleet) if name != PODS}

    return {
        "jobs": {"total": len(jobs), **by_state},
        "makespan": _r(makespan),
        "lowerBound": _r(bound),
        "makespanRatio": _r(makespan / bound, 4) if bound > 0 and makespan > 0 else None,
        "partialGangs": sum(1 for j in jobs if j.partial),
        "attempts": {"total": sum(len(j.attempts) for j in jobs), "byOutcome": dict(sorted(outcomes.items()))},
        "wait": {"p50": _r(percentile(waits, 50)), "p95": _r(percentile(waits, 95)),
                 "max": _r(max(waits, default=None))},
        "utilisation": {"held": util(result.held), "useful": util(useful)},
        "preemption": preemption_summary(jobs),
        "queues": queue_shares(result),
        "simulation": {"wallSeconds": _r(result.wall_seconds), "cycles": result.cycles,
                       "jobsExamined": result.examined, "endTime": _r(result.end_time),
                       "horizonReached": result.horizon_reached},
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
    """Per queue: dominant share of the fleet (engine's admitted usage) over time, and during
    saturation (every queue with jobs has a backlog) compared with its weight's fraction."""
    active = sorted({j.spec.queue for j in result.jobs.values()})
    weights = {q.name: q.weight for q in result.scenario.queues if q.name in active}
    total_weight = sum(weights.values()) or 1
    saturated = [s for s in result.timeline if all(s.queue_backlog.get(q, 0) > 0 for q in active)]
    out: dict[str, Any] = {}
    sat_mean = {q: (sum(s.queue_share.get(q, 0.0) for s in saturated) / len(saturated)) if saturated else None
                for q in active}
    sat_total = sum(v for v in sat_mean.values() if v) or 0.0
    for q in active:
        series = [s.queue_share.get(q, 0.0) for s in result.timeline]
        target = weights.get(q, 1) / total_weight
        mean = sat_mean[q]
        fraction = mean / sat_total if mean is not None and sat_total > 0 else None
        out[q] = {
            "weight": weights.get(q, 1),
            "targetFraction": _r(target, 4),
            "meanShare": _r(sum(series) / len(series), 4) if series else None,
            "p50Share": _r(percentile(series, 50), 4),
            "maxShare": _r(max(series, default=None), 4),
            "saturatedSamples": len(saturated),
            "saturatedMeanShare": _r(mean, 4),
            "saturatedFraction": _r(fraction, 4),
            "deviationFromWeight": _r(abs(fraction - target) / target, 4) if fraction is not None else None,
        }
    return out


def build_report(result: SimResult) -> dict[str, Any]:
    summary = summarise(result)
    return {
        "scenario": result.scenario.name,
        "scenarioFile": result.scenario.source,
        "policy": result.policy,
        "seed": result.scenario.seed,
        "memberScheduler": result.scenario.member_scheduler,
        "statusPeriod": result.scenario.status_period,
        "makespan": summary["makespan"],
        "summary": summary,
        "jobs": [job_record(j) for j in sorted(result.jobs.values(), key=lambda j: (j.spec.submit_at, j.spec.id))],
        "timeline": [{
            "time": _r(s.time), "backlog": s.backlog, "waitingInMembers": s.waiting_in_members, "running": s.running,
            "usefulShare": _r(s.useful, 4),
            "clusterUtilisation": {k: _r(v, 4) for k, v in s.cluster_util.items()},
            "queueShare": {k: _r(v, 4) for k, v in s.queue_share.items()},
        } for s in result.timeline],
    }

"""A saturated bench fleet for churn tests: ``engine.bench``'s clusters and queues, a backlog of its churn jobs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

import engine.bench as b
from engine.core.scheduler import Engine
from engine.model import CycleResult
from engine.policy import load_policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def churn_engine(policy: str, jobs: int, queues: int, clusters: int, rng: random.Random,
                 exhaustive: bool = False) -> Engine:
    """An engine with ``policies/<policy>.yaml``, the fleet and ``jobs`` churn jobs submitted (no cycle yet)."""
    fleet, lines, _ = b.build_fleet(b.BenchShape(0, queues, clusters, 1))
    engine = Engine(load_policy(POLICIES / f"{policy}.yaml").pipeline, exhaustive=exhaustive)
    for c in fleet:
        engine.upsert_cluster(c)
    for q in lines:
        engine.upsert_queue(q)
    for i in range(jobs):
        engine.submit(b.make_churn_job(rng, i, lines))
    return engine


def finish_one_by_one(engine: Engine, rng: random.Random, finishes: int) -> Iterator[CycleResult]:
    """Fill the fleet (a first cycle at t=1), then finish one running job per cycle, the victims of the cycle
    before gone first (as ``atoll bench --churn``): each finish's cycle result."""
    first = engine.cycle(1.0)
    running = [a.job_id for a in first.admitted]
    evicting = [v for p in first.preemptions for v in p.victims]
    for k in range(finishes):
        now = 2.0 + k
        for victim in evicting:
            engine.evicted(victim, now, ended_at=now)
        gone = set(evicting)
        running = [j for j in running if j not in gone]
        engine.finished(running.pop(rng.randrange(len(running))), True, ended_at=now)
        result = engine.cycle(now)
        evicting = [v for p in result.preemptions for v in p.victims]
        running.extend(a.job_id for a in result.admitted)
        yield result

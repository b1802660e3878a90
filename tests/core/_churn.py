"""A saturated bench fleet for churn tests: ``engine.bench``'s clusters and queues, a backlog of its churn jobs."""

from __future__ import annotations

import random
from pathlib import Path

import engine.bench as b
from engine.core.scheduler import Engine
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

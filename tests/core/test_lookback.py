"""Policy spec.lookback: a cycle considers only the first N jobs of each queue (Armada's queue lookback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.scheduler import Engine
from engine.errors import InputError
from engine.model import Cluster, Job, Queue, Task
from engine.policy.load import load_policy, load_policy_text

ROOT = Path(__file__).resolve().parents[2]


def _engine(lookback: int) -> Engine:
    pipeline = load_policy(ROOT / "policies" / "default.yaml").pipeline
    assert pipeline.lookback == 0                      # off by default
    pipeline.lookback = lookback
    engine = Engine(pipeline)
    engine.upsert_cluster(Cluster("m0", allocatable={"cpu": 4000, "memory": 8 * 2**30}))
    engine.upsert_queue(Queue("q0"))
    for i in range(6):             # four jobs too big for the fleet, then two that fit
        engine.submit(Job(f"ns/j{i}", f"j{i}", "ns", queue="q0", submit_time=float(i),
                          tasks=[Task("t", 1, 1, {"cpu": 5000 if i < 4 else 1000})]))
    return engine


def test_without_lookback_small_jobs_behind_big_ones_are_backfilled() -> None:
    assert [a.job_id for a in _engine(0).cycle(1.0).admitted] == ["ns/j4", "ns/j5"]


def test_lookback_bounds_what_a_cycle_considers() -> None:
    engine = _engine(3)
    result = engine.cycle(1.0)
    assert result.admitted == []
    behind = "not considered yet: behind the first 3 jobs of queue q0 (policy lookback)"
    assert [engine.state.jobs[f"ns/j{i}"].pending_reason == behind for i in range(6)] == [False] * 3 + [True] * 3
    engine.remove_job("ns/j0")
    engine.remove_job("ns/j1")
    engine.state.capacity_epoch += 1                   # as a queue edit or a release would
    assert [a.job_id for a in engine.cycle(2.0).admitted] == ["ns/j4"]     # j2, j3, j4 are the first three now


def test_lookback_is_a_policy_setting() -> None:
    text = (ROOT / "policies" / "default.yaml").read_text().replace("\nspec:\n", "\nspec:\n  lookback: 100\n", 1)
    assert load_policy_text(text, "p.yaml").pipeline.lookback == 100
    with pytest.raises(InputError, match="lookback"):
        load_policy_text(text.replace("lookback: 100", "lookback: -1"), "p.yaml")

"""atoll bench's saturated-fleet case: a full fleet and a higher-priority backlog preempt (numbers are benchmarks)."""

from __future__ import annotations

from engine._data import data_path
from engine.bench import BenchShape, run_saturated
from engine.policy import load_policy


def test_the_saturated_case_fills_the_fleet_and_preempts_with_the_default_policy() -> None:
    path = data_path("policies", "default.yaml")
    out = run_saturated(BenchShape(200, 4, 2), lambda: load_policy(path).pipeline)
    assert out["saturated_running"] > 0 and out["saturated_examined"] == 200
    assert 0 < out["saturated_preemptions"] <= out["saturated_victims"] <= out["saturated_running"]
    off = run_saturated(BenchShape(200, 4, 2), lambda: load_policy(data_path("policies", "no-preemption.yaml")).pipeline)
    assert off["saturated_preemptions"] == 0

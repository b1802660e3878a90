"""The shipped churn-* scenarios are exactly what engine.sim.churn renders, and saturate the fleet."""

from __future__ import annotations

from pathlib import Path

from engine.sim.churn import SIZES, render
from engine.sim.scenario import load_scenario, load_scenario_text

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_files_are_the_generator_output() -> None:
    for size in SIZES:
        assert (ROOT / "scenarios" / f"churn-{size}.yaml").read_text() == render(size), size


def test_family_differs_only_in_counts() -> None:
    small = load_scenario(ROOT / "scenarios" / "churn-1k.yaml")
    big = load_scenario_text(render("10k"), "churn-10k.yaml")
    assert len(small.jobs) == 1000 and len(big.jobs) == 10000
    assert [c.nodes for c in small.clusters] == [c.nodes for c in big.clusters]
    assert len(small.clusters) == 20 and all(len(c.nodes) == 50 for c in small.clusters)
    assert len(small.queues) == 20
    shapes = {tuple((t.replicas, t.min_available, tuple(sorted(t.resources.items()))) for t in j.tasks)
              for j in big.jobs}
    assert len(shapes) == 5
    # arrivals outpace the fleet: the GPU work submitted per second exceeds the fleet's GPUs
    gpu_seconds = sum(j.duration * sum(t.replicas * t.resources.get("nvidia.com/gpu", 0) for t in j.tasks)
                      for j in big.jobs)
    span = max(j.submit_at for j in big.jobs)
    assert gpu_seconds / span > 1.5 * big.fleet_allocatable["nvidia.com/gpu"]

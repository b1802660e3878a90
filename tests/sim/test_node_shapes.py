"""Node shapes in the simulator: resource models in scenarios, allocatableModelings as Karmada computes
them, karmada-scheduler's placement in gate mode, and stalled attempts in the report."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from engine.core.nodefit import DEFAULT_GRADES, allocatable_modelings, shapes_of
from engine.errors import InputError
from engine.model import Cluster, Task
from engine.policy import load_policy
from engine.resources import CPU, GPU, MEMORY, PODS
from engine.sim.driver import simulate
from engine.sim.karmada import available_replicas, karmada_place
from engine.sim.members import Member
from engine.sim.report import summarise
from engine.sim.scenario import load_scenario, load_scenario_text
from tests.sim.helpers import scenario

ROOT = Path(__file__).resolve().parents[2]
GPU_MODELS = """
resourceModels:
  - {grade: 0, ranges: [{name: nvidia.com/gpu, min: "0", max: "1"}]}
  - {grade: 1, ranges: [{name: nvidia.com/gpu, min: "1", max: "2"}]}
  - {grade: 2, ranges: [{name: nvidia.com/gpu, min: "2", max: "4"}]}
  - {grade: 3, ranges: [{name: nvidia.com/gpu, min: "4", max: "8"}]}
  - {grade: 4, ranges: [{name: nvidia.com/gpu, min: "8", max: "1000"}]}
"""
GPU_GRADES = [{GPU: 0}, {GPU: 1}, {GPU: 2}, {GPU: 4}, {GPU: 8}]
CLUSTER = "clusters: [{name: a, nodes: [{count: 4, allocatable: {cpu: '64', nvidia.com/gpu: '8', pods: '110'}}]}]"


def test_scenario_models_default_to_karmadas_and_an_empty_list_means_none() -> None:
    s = scenario(CLUSTER)
    assert s.clusters[0].grades == [dict(g) for g in DEFAULT_GRADES]
    assert scenario(CLUSTER + "\nresourceModels: []").clusters[0].grades is None
    assert scenario(CLUSTER + GPU_MODELS).clusters[0].grades == GPU_GRADES


@pytest.mark.parametrize("models, message", [
    ("[{grade: 0, ranges: [{name: cpu, min: '0', max: '2'}]}, {grade: 1, ranges: [{name: cpu, min: '3'}]}]",
     r"spec.resourceModels\[1\].ranges\[0\].min \(line \d+\): cpu: ranges must be contiguous"),
    ("[{grade: 0, ranges: [{name: cpu, min: '0'}]}, {grade: 1, ranges: [{name: memory, min: 1Gi}]}]",
     r"spec.resourceModels\[1\].ranges .*every grade must list the same resources \(cpu\)"),
    ("[{grade: 0, ranges: [{name: cpu, min: '0'}]}, {grade: 0, ranges: [{name: cpu, min: '1'}]}]",
     r"spec.resourceModels\[1\].grade .*grade 0 is declared twice"),
    ("[{grade: 0, ranges: [{name: cpu, min: '0', max: '0'}]}]",
     r"spec.resourceModels\[0\].ranges\[0\].max .*max must be greater than min"),
])
def test_bad_models_are_one_precise_error(models: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        scenario(CLUSTER + f"\nresourceModels: {models}")


def test_members_report_allocatable_modelings_as_karmada_computes_them() -> None:
    """The reference's worked example, through a member's own scheduler: 4 nodes x 8 GPUs, one 5-GPU pod each."""
    member = Member("a", {}, [{CPU: 64000, GPU: 8, PODS: 110}] * 4, "volcano", random.Random(1), grades=GPU_GRADES)
    tasks = {f"t{i}": Task(f"t{i}", 1, 1, {CPU: 1000, GPU: 5}) for i in range(4)}
    for i in range(4):
        member.add(f"j{i}", {f"t{i}": 1}, tasks)
    member.schedule()
    expected = allocatable_modelings(GPU_GRADES, [({CPU: 64000, GPU: 8, PODS: 110}, [{CPU: 1000, GPU: 5}])] * 4)
    assert member.allocatable_modelings() == expected == [0, 0, 4, 0, 0]
    shapes = member.snapshot(10.0).node_shapes
    assert shapes is not None and shapes.count == 4 and not shapes.karmada_defaults
    assert Member("b", {}, [{CPU: 1000}], "volcano", random.Random(1)).snapshot(0.0).node_shapes is None


def worked_cluster(models: bool = True) -> Cluster:
    shapes = shapes_of(GPU_GRADES, [0, 0, 4, 0, 0]) if models else None
    return Cluster("a", allocatable={GPU: 32, CPU: 256000, PODS: 440}, allocated={GPU: 20, CPU: 4000, PODS: 4},
                   node_shapes=shapes)


def test_general_estimator_matches_the_reference_table() -> None:
    c = worked_cluster()
    assert [available_replicas(c, {GPU: n}) for n in (8, 3, 2, 1)] == [0, 0, 4, 8]
    assert available_replicas(c, {CPU: 32000, GPU: 1}) == 0          # v1.18+: cpu is not in the model
    plain = worked_cluster(models=False)
    assert [available_replicas(plain, {GPU: n}) for n in (8, 3, 2, 1)] == [1, 4, 6, 12]   # blind to nodes
    full = Cluster("f", allocatable={PODS: 10}, allocated={PODS: 6}, allocating={PODS: 4})
    assert available_replicas(full, {CPU: 1}) == 0                   # no pod slots left


def test_aggregated_takes_the_fewest_clusters_by_available_replicas() -> None:
    big = Cluster("big", allocatable={CPU: 100_000})
    small = Cluster("small", allocatable={CPU: 30_000})
    tasks = [Task("w", 8, 8, {CPU: 10_000})]                          # available: big 10, small 3
    assert karmada_place(tasks, [small, big], "aggregated") == {"big": {"w": 8}}
    assert karmada_place(tasks, [small, big], "dynamic-weight") == {"big": {"w": 7}, "small": {"w": 1}}
    assert karmada_place(tasks, [small, big], "duplicated") == {"big": {"w": 8}, "small": {"w": 8}}
    assert karmada_place([Task("w", 20, 20, {CPU: 10_000})], [small, big], "aggregated") is None


def run_shipped(text: str, mode: str) -> dict:
    policy = load_policy(ROOT / "policies" / "default.yaml")
    return summarise(simulate(load_scenario_text(text, "fragmented-gpu.yaml"), policy.pipeline, "default",
                              placement_mode=mode))


def test_fragmented_gpu_bind_mode_never_stalls_and_stays_near_the_bound() -> None:
    text = (ROOT / "scenarios" / "fragmented-gpu.yaml").read_text()
    bind = run_shipped(text, "bind")
    assert bind["stalled"]["beyondTwoStatusPeriods"] == 0 and bind["stalled"]["attempts"] == 0
    assert bind["jobs"]["Succeeded"] == bind["jobs"]["total"] and bind["makespanRatio"] <= 1.15
    # the same fleet with no resource models: summed GPUs "fit", pods wait in members for a node
    blind = run_shipped(re.sub(r"  resourceModels:.*?\n  clusters:", "  resourceModels: []\n  clusters:", text,
                               flags=re.S), "bind")
    assert blind["stalled"]["beyondTwoStatusPeriods"] > 0 and blind["makespanRatio"] > 1.5


def test_gate_mode_leaves_placement_to_the_simulated_karmada_scheduler() -> None:
    s = load_scenario(ROOT / "scenarios" / "fragmented-gpu.yaml")
    policy = load_policy(ROOT / "policies" / "default.yaml")
    result = simulate(s, policy.pipeline, "default", placement_mode="gate")
    assert result.placement_mode == "gate"
    placed = [a for j in result.jobs.values() for a in j.attempts if a.placed_time is not None]
    assert placed and all(a.placed_time is not None and a.placed_time >= a.admit_time for a in placed)
    summary = summarise(result)
    assert summary["stalled"]["placementMode"] == "gate"
    # karmada-scheduler cannot see its own placements between status reports: some attempts wait
    assert summary["stalled"]["attempts"] > 0


def test_default_models_make_karmada_unable_to_place_pods_above_the_grade_edges() -> None:
    """10 cpu / 10Gi nodes are grade 1 (1 cpu, 4Gi) under Karmada's default models: a 2-cpu pod gets 0."""
    s = scenario("clusters: [{name: a, nodes: [{count: 2, allocatable: {cpu: '10', memory: 10Gi, pods: '110'}}]}]\n"
                 "jobs: [{name: j, duration: 10s, tasks: [{name: w, replicas: 1, resources: {cpu: '2', memory: 2Gi}}]}]")
    policy = load_policy(ROOT / "policies" / "default.yaml")
    gate = simulate(s, policy.pipeline, "default", placement_mode="gate")
    assert gate.jobs["default/j"].attempts[0].placed_time is None
    assert "karmada-scheduler never placed it" in gate.jobs["default/j"].reason
    bind = simulate(s, policy.pipeline, "default", placement_mode="bind")     # Atoll ignores the default models
    assert bind.jobs["default/j"].state == "Succeeded"


def test_gate_mode_admits_on_reported_capacity_as_the_controller_does() -> None:
    """member1 has 2 slots free, member2 1 (z holds 3) and w needs 3 in one cluster. When z ends, crediting its
    capacity at once (bind mode does) would admit w before any report shows the room: karmada-scheduler, placing
    from the last report, would then split w 2 + 1 over both members. The controller admits only once a report
    shows member2 empty, and karmada-scheduler puts w whole there (e2e/tests/test_sim_parity.py); so does gate
    mode. Bind mode still credits the end at once (Atoll places on what it credited: only the timing differs)."""
    slot = "{name: w, replicas: %d, resources: {cpu: '16', memory: 1Gi}}"
    s = scenario("clusters: [{name: member1, nodes: [{count: 2, allocatable: {cpu: '32', memory: 256Gi}}]},\n"
                 "           {name: member2, nodes: [{count: 2, allocatable: {cpu: '32', memory: 256Gi}}]}]\n"
                 f"jobs:\n  - {{name: x, submitAt: 0s, duration: 2h, tasks: [{slot % 2}]}}\n"
                 f"  - {{name: z, submitAt: 15s, duration: 90s, tasks: [{slot % 3}]}}\n"
                 f"  - {{name: w, submitAt: 30s, duration: 10m, tasks: [{slot % 3}]}}")
    policy = load_policy(ROOT / "policies" / "default.yaml")
    gate = simulate(s, policy.pipeline, "default", placement_mode="gate").jobs["default/w"].attempts
    assert [(a.admit_time, a.placement) for a in gate] == [(110.0, {"member2": {"w": 3}})]     # the report at 110 s
    bind = simulate(s, policy.pipeline, "default", placement_mode="bind").jobs["default/w"].attempts
    assert [(a.admit_time, a.placement) for a in bind] == [(105.0, {"member2": {"w": 3}})]     # z's end

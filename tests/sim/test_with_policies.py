"""The shipped policies (engine.policy, real plugins) on small fleets: the behaviour the README claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli import main
from engine.policy import load_policy
from engine.sim.driver import simulate
from engine.sim.outcome import SimResult
from engine.sim.report import summarise
from tests.sim.helpers import nodes, scenario

ROOT = Path(__file__).resolve().parents[2]


def run(policy: str, body: str, member: str = "volcano", seed: int = 7) -> SimResult:
    loaded = load_policy(ROOT / "policies" / f"{policy}.yaml")
    return simulate(scenario(body, member=member, seed=seed), loaded.pipeline, loaded.name)


# a KubeCon test in miniature: 80 jobs x 10 pods x 2 cpu on 2 members x 6 nodes x 10 cpu (3 gangs each)
KUBECON = f"""
clusters:
  - {{name: member1, nodes: {nodes(6)}}}
  - {{name: member2, nodes: {nodes(6)}}}
generators:
  - count: 80
    namePrefix: batch
    duration: {{min: 90s, max: 270s}}
    deadline: 900s
    tasks: [{{name: worker, replicas: 10, minAvailable: 10, resources: {{cpu: "2", memory: 2Gi}}}}]
"""


def test_default_policy_runs_every_gang_whole() -> None:
    s = summarise(run("default", KUBECON))
    assert s["jobs"]["Succeeded"] == 80 and s["partialGangs"] == 0
    assert s["attempts"]["byOutcome"] == {"Succeeded": 80}
    assert s["makespanRatio"] < 1.2


def test_default_policy_also_protects_kube_default_members() -> None:
    s = summarise(run("default", KUBECON, member="kube-default"))
    assert s["jobs"]["Succeeded"] == 80 and s["partialGangs"] == 0


def test_karmada_fifo_with_kube_default_members_deadlocks_like_the_talk() -> None:
    s = summarise(run("karmada-fifo", KUBECON, member="kube-default"))
    assert s["partialGangs"] > 10
    assert s["attempts"]["byOutcome"].get("DeadlineExceeded", 0) > 10
    assert s["jobs"]["Succeeded"] < 80


def test_cluster_loss_is_requeued_by_the_default_recover_stage() -> None:
    body = f"""
clusters:
  - {{name: member1, nodes: {nodes(5)}}}
  - {{name: member2, nodes: {nodes(5)}}}
generators:
  - count: 20
    namePrefix: job
    duration: 100s
    tasks: [{{name: worker, replicas: 5, minAvailable: 5, resources: {{cpu: "2", memory: 2Gi}}}}]
events:
  - {{at: 50s, cluster: member1, ready: false}}
  - {{at: 300s, cluster: member1, ready: true}}
"""
    result = run("default", body)
    lost = [j for j in result.jobs.values() if j.attempts and j.attempts[0].outcome == "ClusterLost"]
    assert lost and all(j.state == "Succeeded" for j in result.jobs.values())
    for job in lost:
        assert "member1" not in job.attempts[1].placement          # the failed cluster is avoided
        assert job.attempts[1].admit_time >= 60.0                  # requeue-backoff's initial delay


def test_atoll_simulate_compare_with_shipped_policies(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--compare", str(ROOT / "policies/default.yaml"),
                 str(ROOT / "policies/karmada-fifo.yaml"), str(ROOT / "scenarios/quickstart.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    assert "default" in out and "karmada" in out and "partial" in out and "x" in out


def test_atoll_simulate_bad_scenario_is_one_line_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: atoll.dev/v1alpha1\nkind: Scenario\nmetadata: {name: b}\nspec:\n  clusters: []\n")
    assert main(["simulate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"atoll: error: {bad}: spec.clusters (line 5):") and len(err.splitlines()) == 1


def test_a_queue_capability_of_zero_gpus_admits_no_gpu_job() -> None:
    body = """
clusters:
  - {name: m1, nodes: [{count: 2, allocatable: {cpu: "10", memory: 10Gi, pods: "110", nvidia.com/gpu: "8"}}]}
queues: [{name: cpu-only, capability: {cpu: "20", nvidia.com/gpu: "0"}}]
jobs:
  - {name: train, queue: cpu-only, submitAt: 0s, duration: 60s, tasks: [{name: w, replicas: 1, resources: {cpu: "1", nvidia.com/gpu: "1"}}]}
  - {name: etl, queue: cpu-only, submitAt: 0s, duration: 60s, tasks: [{name: w, replicas: 1, resources: {cpu: "1"}}]}
"""
    result = run("default", body)
    assert result.jobs["default/etl"].state == "Succeeded"
    assert result.jobs["default/train"].state == "Pending"      # kept, never run: zero means none

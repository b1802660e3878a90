"""Scenario files: parsing, expansion with the seed, and precise errors naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InputError
from engine.sim.scenario import load_scenario, load_scenario_text, lower_bound, parse_duration
from tests.sim.helpers import nodes, scenario

ROOT = Path(__file__).resolve().parents[2]

BASE = f"""
clusters:
  - {{name: m1, labels: {{region: eu}}, nodes: {nodes(2)}}}
queues:
  - {{name: q, weight: 2, priority: 3, capability: {{cpu: "8"}}, guarantee: {{cpu: "1"}}}}
jobs:
  - name: a
    queue: q
    submitAt: 1m
    duration: 90s
    deadline: 1h
    tasks:
      - {{name: worker, replicas: 2, resources: {{cpu: 500m, memory: 1Gi}}}}
"""


def error(body: str) -> str:
    with pytest.raises(InputError) as info:
        scenario(body, source="bad.yaml")
    return str(info.value)


@pytest.mark.parametrize("text,seconds", [(0, 0.0), (90, 90.0), (1.5, 1.5), ("90s", 90.0), ("3m", 180.0),
                                          ("1h", 3600.0), ("1h30m", 5400.0), ("250ms", 0.25), ("2d", 172800.0),
                                          ("45", 45.0)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text, "x") == seconds


@pytest.mark.parametrize("bad", ["5 minutes", "-3s", "", "3x", -1, True, "1h-5m"])
def test_bad_durations_are_named(bad: object) -> None:
    with pytest.raises(InputError, match="f.yaml: spec.x: invalid duration|f.yaml: spec.x: duration"):
        parse_duration(bad, "f.yaml: spec.x")


def test_parses_clusters_queues_and_jobs_exactly() -> None:
    s = scenario(BASE)
    assert s.status_period == 10.0 and s.member_scheduler == "volcano"
    assert s.clusters[0].allocatable == {"cpu": 20000, "memory": 20 * 2**30, "pods": 220}
    q = s.queues[0]
    assert (q.weight, q.priority, q.capability, q.guarantee) == (2, 3, {"cpu": 8000}, {"cpu": 1000})
    job = s.jobs[0]
    assert (job.submit_at, job.duration, job.deadline) == (60.0, 90.0, 3600.0)
    assert job.tasks[0].min_available == 2 and job.tasks[0].resources == {"cpu": 500, "memory": 2**30}
    built = job.build()
    # one pod slot per pod, as the controller's translation adds (engine.kube.translate.pod_requests)
    assert built.id == "default/a" and built.demand == {"cpu": 1000, "memory": 2**31, "pods": 2}


def test_generators_expand_deterministically_with_the_seed() -> None:
    body = f"""
clusters: [{{name: m1, nodes: {nodes(1)}}}]
generators:
  - count: 12
    namePrefix: gen
    submitAt: {{start: 10s, every: 5s}}
    duration: {{min: 90s, max: 270s}}
    tasks: [{{name: w, replicas: 1, resources: {{cpu: "1"}}}}]
"""
    a, b, c = scenario(body, seed=1), scenario(body, seed=1), scenario(body, seed=2)
    assert [j.name for j in a.jobs][:2] == ["gen-00", "gen-01"] and len(a.jobs) == 12
    assert [j.submit_at for j in a.jobs][:3] == [10.0, 15.0, 20.0]
    assert [j.duration for j in a.jobs] == [j.duration for j in b.jobs]
    assert [j.duration for j in a.jobs] != [j.duration for j in c.jobs]
    assert all(90 <= j.duration <= 270 for j in a.jobs)
    assert a.queues[0].name == "default"                 # implicit default queue


def test_schema_errors_name_file_and_field() -> None:
    msg = error(BASE.replace("replicas: 2", "replicas: 0"))
    assert msg == "bad.yaml: spec.jobs[0].tasks[0].replicas (line 19): 0 is less than the minimum of 1"
    msg = error(BASE.replace("deadline: 1h", "deadlin: 1h"))
    assert "bad.yaml: spec.jobs[0]" in msg and "deadlin" in msg
    msg = error(BASE.replace("name: m1", "name: M_1"))
    assert "bad.yaml: spec.clusters[0].name" in msg


def test_bad_values_name_the_field() -> None:
    assert error(BASE.replace("duration: 90s", "duration: 90 seconds")).startswith(
        "bad.yaml: spec.jobs[0].duration (line 16): invalid duration '90 seconds'")
    assert error(BASE.replace("cpu: 500m", "cpu: 5 cores")).startswith(
        "bad.yaml: spec.jobs[0].tasks[0].resources.cpu (line 19): invalid quantity '5 cores'")
    assert error(BASE.replace('cpu: "8"', 'cpu: lots')).startswith("bad.yaml: spec.queues[0].capability.cpu (line 11):")
    assert "spec.clusters[0].nodes[0].allocatable.memory" in error(BASE.replace("memory: 10Gi", "memory: 10GB!"))


def test_semantic_errors_name_the_field() -> None:
    assert error(BASE.replace("queue: q", "queue: nope")).startswith("bad.yaml: spec.jobs[0].queue (line 14): job a: queue")
    assert "minAvailable 3 exceeds replicas 2" in error(BASE.replace("replicas: 2,", "replicas: 2, minAvailable: 3,"))
    dup = BASE + "  - {name: a, queue: q, duration: 1, tasks: [{name: w, replicas: 1, resources: {cpu: 1}}]}\n"
    assert "job 'default/a' is declared twice" in error(dup)
    assert "spec.events[0].cluster" in error(BASE + "events: [{at: 1m, cluster: m9, ready: false}]\n")


def test_zero_status_period_is_refused() -> None:
    text = ("apiVersion: atoll.dev/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec:\n  statusPeriod: 0s\n"
            f"  clusters: [{{name: m1, nodes: {nodes(1)}}}]\n")
    with pytest.raises(InputError, match=r"z.yaml: spec.statusPeriod \(line 5\): must be greater than zero"):
        load_scenario_text(text, "z.yaml")


def test_yaml_syntax_error_names_line() -> None:
    with pytest.raises(InputError, match=r"y.yaml: line 3, column 1: YAML syntax error"):
        load_scenario_text("apiVersion: x\nkind: [unclosed\n", "y.yaml")


def test_duplicate_keys_are_errors_not_silently_dropped() -> None:
    text = BASE.replace("    duration: 90s\n", "    duration: 90s\n    duration: 30s\n")
    assert "found duplicate key 'duration' (first at line 16)" in error(text)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read scenario"):
        load_scenario(tmp_path / "nope.yaml")


def test_shipped_scenarios_load() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        assert load_scenario(path).jobs, path


def test_kubecon_scenario_is_the_talks_test() -> None:
    s = load_scenario(ROOT / "scenarios" / "kubecon-1000.yaml")
    assert len(s.jobs) == 1000 and sum(len(c.nodes) for c in s.clusters) == 100 and len(s.clusters) == 4
    assert s.fleet_allocatable["cpu"] == 1000 * 1000 and s.fleet_allocatable["memory"] == 1000 * 2**30
    assert all(j.deadline == 900 and 90 <= j.duration <= 270 for j in s.jobs)
    assert {(t.replicas, t.min_available, t.resources["cpu"]) for j in s.jobs for t in j.tasks} == {(10, 10, 2000)}
    total = sum(20000 * j.duration for j in s.jobs)
    assert lower_bound(s) == pytest.approx(max(total / 1_000_000, max(j.duration for j in s.jobs)))


def test_kube_default_variant_differs_only_in_member_scheduler() -> None:
    a = load_scenario(ROOT / "scenarios" / "kubecon-1000.yaml")
    b = load_scenario(ROOT / "scenarios" / "kubecon-1000-kube-default.yaml")
    assert (a.member_scheduler, b.member_scheduler) == ("volcano", "kube-default")
    assert [(j.name, j.duration, j.deadline) for j in a.jobs] == [(j.name, j.duration, j.deadline) for j in b.jobs]
    assert [c.nodes for c in a.clusters] == [c.nodes for c in b.clusters]


def test_lower_bound_leaves_out_jobs_no_policy_can_run() -> None:
    text = """
apiVersion: atoll.dev/v1alpha1
kind: Scenario
metadata: {name: infeasible}
spec:
  clusters:
    - name: m1
      nodes: [{count: 1, allocatable: {cpu: "4", memory: 4Gi, pods: "10"}}]
  queues: [{name: a}]
  jobs:
    - {name: fits, queue: a, duration: 10s, tasks: [{name: w, replicas: 2, resources: {cpu: "2"}}]}
    - {name: too-big, queue: a, duration: 500s, tasks: [{name: w, replicas: 3, resources: {cpu: "2"}}]}
    - {name: no-gpu, queue: a, duration: 500s, tasks: [{name: w, replicas: 1, resources: {nvidia.com/gpu: "1"}}]}
"""
    s = load_scenario_text(text, "infeasible.yaml")
    assert lower_bound(s) == pytest.approx(10.0)      # 40 cpu-seconds over 4 cpu; the other two never fit

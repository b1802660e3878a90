"""Scenario files: parsing, expansion with the seed, and precise errors naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InputError
from engine.model import Queue
from engine.sim.scenario import load_scenario, load_scenario_text, lower_bound, parse_duration
from engine.sim.scenario_checks import check_queue_tree
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


# -- refused inputs found by a hostile-input probe ------------------------------------------------------------

FULL = """apiVersion: atoll.dev/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  statusPeriod: 10s
  schedulePeriod: 1s
  stuckAfter: 0s
  horizon: 30d
  clusters:
    - name: m1
      nodes:
        - count: 2
          allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
  queues:
    - {name: team-a, weight: 2, priority: 0}
    - {name: team-b, weight: 1}
  jobs:
    - name: j1
      queue: team-a
      priority: 10
      submitAt: 0s
      duration: 60s
      deadline: 1h
      tasks:
        - {name: worker, replicas: 2, resources: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}}
  generators:
    - count: 3
      namePrefix: g
      queue: team-b
      submitAt: {start: 0s, every: 5s}
      duration: {min: 10s, max: 20s}
      tasks: [{name: w, replicas: 1, resources: {cpu: "1"}}]
  events:
    - {at: 600s, cluster: m1, ready: false}
"""


def full_error(old: str, new: str, source: str = "p.yaml") -> tuple[str, int]:
    """The one-line error of FULL with ``old`` (once) replaced by ``new``, and the line ``new`` starts on."""
    assert FULL.count(old) == 1, old
    text = FULL.replace(old, new)
    first = new.strip("\n").splitlines()[0]
    line = next(n for n, row in enumerate(text.splitlines(), 1) if first in row)
    with pytest.raises(InputError) as info:
        load_scenario_text(text, source)
    return str(info.value), line


def assert_refused(old: str, new: str, field: str, words: str) -> None:
    """FULL with ``old`` replaced by ``new`` is refused with ``words``, naming ``spec.<field>`` and its line."""
    message, line = full_error(old, new)
    assert message == f"p.yaml: spec.{field} (line {line}): {words}"


def test_the_probe_base_loads() -> None:
    s = load_scenario_text(FULL, "p.yaml")
    assert len(s.jobs) == 4 and s.clusters[0].nodes[0]["pods"] == 110


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), "nan", "inf", "1e400", 10**400,
                                 "9" * 400 + "s"])
def test_non_finite_durations_are_named(bad: object) -> None:
    with pytest.raises(InputError, match=r"^f.yaml: spec.x: (duration .* is not a finite number of seconds"
                                         r"|duration .* is negative)$"):
        parse_duration(bad, "f.yaml: spec.x")


@pytest.mark.parametrize("old,field", [
    ("submitAt: 0s", "jobs[0].submitAt"), ("duration: 60s", "jobs[0].duration"), ("deadline: 1h", "jobs[0].deadline"),
    ("statusPeriod: 10s", "statusPeriod"), ("schedulePeriod: 1s", "schedulePeriod"), ("horizon: 30d", "horizon"),
    ("stuckAfter: 0s", "stuckAfter"), ("at: 600s", "events[0].at"), ("every: 5s", "generators[0].submitAt.every"),
    ("start: 0s", "generators[0].submitAt.start"), ("min: 10s", "generators[0].duration.min"),
    ("max: 20s", "generators[0].duration.max")])
@pytest.mark.parametrize("value,shown", [(".nan", "nan"), (".inf", "inf"), ("'inf'", "'inf'")])
def test_every_duration_and_time_must_be_finite(old: str, field: str, value: str, shown: str) -> None:
    """NaN made the simulator spin ("made no progress"); nothing documents an infinite duration."""
    key = old.split(":")[0]
    message, line = full_error(old, f"{key}: {value}")
    assert message == f"p.yaml: spec.{field} (line {line}): duration {shown} is not a finite number of seconds"


@pytest.mark.parametrize("old,new,field,words", [
    ("priority: 10", f"priority: {2**63}", "jobs[0].priority", f"{2**63} is greater than the maximum of 2147483647"),
    ("priority: 10", f"priority: {2**31}", "jobs[0].priority", "2147483648 is greater than the maximum of 2147483647"),
    ("priority: 10", f"priority: {-2**31 - 1}", "jobs[0].priority",
     "-2147483649 is less than the minimum of -2147483648"),
    ("priority: 0}", f"priority: {2**64}}}", "queues[0].priority", f"{2**64} is greater than the maximum of 2147483647"),
    ("queue: team-b", f"priority: {2**31}\n      queue: team-b", "generators[0].priority",
     "2147483648 is greater than the maximum of 2147483647"),
    ("statusPeriod: 10s", "statusPeriod: 1e-9", "statusPeriod",
     "statusPeriod 1e-09s and horizon 2.592e+06s make 2.59e+15 periods; at most 10,000,000 (horizon / statusPeriod)"),
    ("statusPeriod: 10s", "statusPeriod: 1ms", "statusPeriod",
     "statusPeriod 0.001s and horizon 2.592e+06s make 2.59e+09 periods; at most 10,000,000 (horizon / statusPeriod)"),
    ("schedulePeriod: 1s", "schedulePeriod: 1e-9", "schedulePeriod",
     "schedulePeriod 1e-09s and horizon 2.592e+06s make 2.59e+15 periods; at most 10,000,000 "
     "(horizon / schedulePeriod)"),
    ("horizon: 30d", "horizon: 1e300", "horizon",
     "statusPeriod 10s and horizon 1e+300s make 1e+299 periods; at most 10,000,000 (horizon / statusPeriod)")])
def test_priorities_beyond_int32_and_periods_far_shorter_than_the_horizon_are_refused(old: str, new: str, field: str,
                                                                                     words: str) -> None:
    """A job priority of 2**63 crashed CEL conversion later (ValueError: overflow); statusPeriod: 1e-9 simulated
    status reports for hours (the period to blame is the one off its default). Priorities are int32, as in
    Kubernetes and Volcano."""
    assert_refused(old, new, field, words)


def test_int32_priority_bounds_are_allowed() -> None:
    s = load_scenario_text(FULL.replace("priority: 10", "priority: 2147483647")
                           .replace("priority: 0}", "priority: -2147483648}"), "p.yaml")
    assert s.jobs[0].priority == 2**31 - 1 and s.queues[0].priority == -2**31


def test_short_periods_within_the_limit_load() -> None:
    s = load_scenario_text(FULL.replace("statusPeriod: 10s", "statusPeriod: 260ms")
                           .replace("schedulePeriod: 1s", "schedulePeriod: 0s"), "p.yaml")
    assert (s.status_period, s.schedule_period) == (0.26, 0.0)       # 30d / 0.26 s < 10,000,000; 0 = no batching
    s = load_scenario_text(FULL.replace("statusPeriod: 10s", "statusPeriod: 1ms").replace("horizon: 30d", "horizon: 10000s"),
                           "p.yaml")
    assert s.status_period == 0.001


def test_explicit_zero_pod_slots_mean_none() -> None:
    """pods: "0" was dropped as a zero and then defaulted to 110 slots; only an absent ``pods`` defaults."""
    s = load_scenario_text(FULL.replace('pods: "110", ', 'pods: "0", '), "p.yaml")
    assert all("pods" not in node for node in s.clusters[0].nodes)       # no slots: no pod fits
    assert s.fleet_allocatable.get("pods", 0) == 0
    s = load_scenario_text(FULL.replace('pods: "110", ', ""), "p.yaml")
    assert all(node["pods"] == 110 for node in s.clusters[0].nodes)


@pytest.mark.parametrize("queues,field,cycle", [
    ("- {name: team-a, parent: team-b}\n    - {name: team-b, parent: team-a}", "queues[0].parent",
     "team-a -> team-b -> team-a"),
    ("- {name: team-a, parent: team-a}\n    - {name: team-b}", "queues[0].parent", "team-a -> team-a"),
    ("- {name: team-a}\n    - {name: team-b, parent: c}\n    - {name: c, parent: d}\n    - {name: d, parent: c}",
     "queues[2].parent", "c -> d -> c"),
    ("- {name: team-a, parent: team-b}\n    - {name: team-b, parent: c}\n    - {name: c, parent: team-b}",
     "queues[1].parent", "team-b -> c -> team-b")])
def test_queue_parent_cycles_are_refused(queues: str, field: str, cycle: str) -> None:
    old = "- {name: team-a, weight: 2, priority: 0}\n    - {name: team-b, weight: 1}"
    text = FULL.replace(old, queues)
    index = int(field.split("[")[1].split("]")[0])
    line = FULL.splitlines().index("  queues:") + 2 + index
    with pytest.raises(InputError) as info:
        load_scenario_text(text, "p.yaml")
    assert str(info.value) == f"p.yaml: spec.{field} (line {line}): cycle {cycle}"


def test_a_deep_queue_tree_is_checked_in_linear_time() -> None:
    """Each queue's parent chain is walked once (a walk per queue would take 10**9 steps here)."""
    chain = [Queue(f"q{i}", parent=f"q{i - 1}" if i else None) for i in range(50_000)]
    check_queue_tree(chain, lambda field: f"p.yaml: spec.{field}")          # no cycle: no error
    chain[0].parent = "q49999"
    with pytest.raises(InputError, match=r"^p.yaml: spec.queues\[0\].parent: cycle q0 -> q49999 -> q49998 -> "
                                         r"q49997 -> q49996 -> \.\.\. \(49994 more\) -> q1 -> q0$"):
        check_queue_tree(chain, lambda field: f"p.yaml: spec.{field}")


@pytest.mark.parametrize("ranges,field", [
    ('[{name: cpu, min: "-1"}]', "resourceModels[0].ranges[0].min"),
    ('[{name: cpu, min: "-1", max: "4"}]', "resourceModels[0].ranges[0].min"),
    ('[{name: cpu, min: "0", max: "-1"}]', "resourceModels[0].ranges[0].max")])
def test_negative_resource_model_bounds_are_refused(ranges: str, field: str) -> None:
    """The first grade's min is normalised to 0 (as Karmada's mutation does) but must still be a valid quantity."""
    message, line = full_error("  clusters:\n", f"  resourceModels: [{{grade: 0, ranges: {ranges}}}]\n  clusters:\n")
    assert message == f"p.yaml: spec.{field} (line {line}): quantity '-1' is negative"


@pytest.mark.parametrize("old,new,field,name,shown", [
    ('nvidia.com/gpu: "1"}', 'nvidia.com/gpu: "0.5"}', "jobs[0].tasks[0].resources['nvidia.com/gpu']",
     "nvidia.com/gpu", "'0.5'"),
    ('nvidia.com/gpu: "1"}', "nvidia.com/gpu: 500m}", "jobs[0].tasks[0].resources['nvidia.com/gpu']",
     "nvidia.com/gpu", "'500m'"),
    ('nvidia.com/gpu: "4"}', "nvidia.com/gpu: 1.5}", "clusters[0].nodes[0].allocatable['nvidia.com/gpu']",
     "nvidia.com/gpu", "1.5"),
    ('pods: "110"', 'pods: "1500m"', "clusters[0].nodes[0].allocatable.pods", "pods", "'1500m'"),
    ('nvidia.com/gpu: "1"}', 'example.com/fpga: "1.0000000000000000000000000001"}',
     "jobs[0].tasks[0].resources['example.com/fpga']", "example.com/fpga", "'1.0000000000000000000000000001'")])
def test_fractional_extended_resources_are_refused(old: str, new: str, field: str, name: str, shown: str) -> None:
    """Kubernetes allows fractions only of cpu, memory, ephemeral-storage and hugepages-*."""
    assert_refused(old, new, field, f"{name} {shown} is not a whole number (Kubernetes allows fractions only of cpu, "
                                    f"memory, ephemeral-storage and hugepages-*)")


def test_fractions_of_native_resources_and_whole_extended_ones_load() -> None:
    resources = ('{cpu: 500m, memory: 1.5Gi, ephemeral-storage: 0.5Gi, hugepages-2Mi: 1.5Mi, nvidia.com/gpu: "2.0", '
                 'example.com/a: 1k, example.com/b: 0.5Ki, example.com/c: 2.0}')
    s = load_scenario_text(FULL.replace('{cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}', resources), "p.yaml")
    assert s.jobs[0].tasks[0].resources == {"cpu": 500, "memory": 3 * 2**29, "ephemeral-storage": 2**29,
                                            "hugepages-2Mi": 3 * 2**19, "nvidia.com/gpu": 2, "example.com/a": 1000,
                                            "example.com/b": 512, "example.com/c": 2}


def test_an_error_under_a_resource_name_with_dots_names_its_line() -> None:
    message, line = full_error('nvidia.com/gpu: "1"}', "nvidia.com/gpu: lots}")
    assert message.startswith(f"p.yaml: spec.jobs[0].tasks[0].resources['nvidia.com/gpu'] (line {line}): "
                              "invalid quantity 'lots'")
